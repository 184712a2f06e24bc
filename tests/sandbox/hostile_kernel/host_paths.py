"""Learns about the machine without reading a file: ``stat``, ``lstat``, ``readlink`` and
``os.path.exists`` of host paths outside the sandbox's roots (a marker file, a symbolic
link, another job's work directory), ``/proc/cmdline`` and ``/proc/loadavg`` (the host's
kernel command line and load), its own mount table (minus its roots); with ``inotify``
set (no guard: ctypes), an inotify watch on a host directory to see writes as they happen.

Expected: the job's root holds only its read roots, work directory, /dev/null and its own
/proc: every host path is ENOENT, /proc has no cmdline or loadavg, the mount table names
only the roots.
"""

import ctypes
import errno
import json
import os

PARAMS: dict = {}  # the test puts its parameters here
out = {}


def attempt(name, fn, *args):
    try:
        value = fn(*args)
        out[name] = "ok: " + (str(value)[:200] if not hasattr(value, "st_size")
                              else f"size={value.st_size} mtime={int(value.st_mtime)}")
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))


for i, path in enumerate(PARAMS["paths"]):
    attempt(f"stat:{i}", os.stat, path)
    attempt(f"lstat:{i}", os.lstat, path)
    out[f"exists:{i}"] = os.path.exists(path)
attempt("readlink", os.readlink, PARAMS["link"])
for name in ("/proc/cmdline", "/proc/loadavg"):
    attempt(name, lambda p: open(p).read().strip(), name)
with open("/proc/self/mountinfo") as f:  # its own mount table, but for its roots
    out["mount points"] = [m for m in (line.split()[4] for line in f)
                           if m not in PARAMS["roots"] and m != os.getcwd()]
if PARAMS.get("inotify"):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    watch = libc.inotify_add_watch(fd, PARAMS["watch"].encode(), 0x100 | 0x2)  # create, modify
    out["inotify"] = "ok" if watch >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print("RESULT " + json.dumps(out), flush=True)
raise RuntimeError("RESULT " + json.dumps(out))
