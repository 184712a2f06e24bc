"""Writes past the disk quota where a directory walk cannot count it: into files it
unlinked while open (``unlinked``), or into files at the bottom of a directory tree whose
path is longer than PATH_MAX (``deep``, made through directory descriptors), each at most
``file_bytes`` (under the file-size limit), 1 MiB at a time, at most ``bound`` bytes in
all (so that a broken quota cannot fill the machine); then it
waits for a byte on descriptor 0 when it has one (the test looks at its work directory
from outside meanwhile).

Expected: the work directory is a tmpfs of the quota: ENOSPC once the quota is used, both
ways; the total written never passes the quota.
"""

import errno
import json
import os

PARAMS: dict = {}  # the test puts its parameters here
chunk = b"\1" * (1 << 20)
out = {"written": 0, "error": None, "depth": 0}
keep = []


def fill(fd, size):
    """Up to ``size`` bytes into ``fd``, 1 MiB at a time, until the first error."""
    start = out["written"]
    while out["written"] - start < size:
        try:
            out["written"] += os.write(fd, chunk)  # after a short write, the next says why
        except OSError as exc:
            out["error"] = errno.errorcode.get(exc.errno, str(exc.errno))
            return


try:
    if PARAMS["mode"] == "unlinked":
        for i in range(PARAMS["bound"] // PARAMS["file_bytes"]):
            fd = os.open(f"hidden-{i}.bin", os.O_WRONLY | os.O_CREAT, 0o600)
            os.unlink(f"hidden-{i}.bin")
            keep.append(fd)
            fill(fd, PARAMS["file_bytes"])
            if out["error"]:
                break
    else:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        while out["depth"] * 201 < 8192:  # twice PATH_MAX below the work directory
            os.mkdir("d" * 200, dir_fd=here)
            here = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            out["depth"] += 1
        keep.append(here)
        for i in range(PARAMS["bound"] // PARAMS["file_bytes"]):  # at the bottom
            fd = os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=here)
            keep.append(fd)
            fill(fd, PARAMS["file_bytes"])
            if out["error"]:
                break
except OSError as exc:
    out["error"] = errno.errorcode.get(exc.errno, str(exc.errno))
print("RESULT " + json.dumps(out), flush=True)
if PARAMS.get("wait"):
    os.read(0, 1)
raise RuntimeError("RESULT " + json.dumps(out))
