"""Tries to make memory it can write code into and run: an anonymous mapping with
PROT_EXEC (with and without PROT_WRITE), ``mprotect`` of its own pages to PROT_EXEC, and
a writable executable private mapping of /dev/zero. Runs without the Python guard (it
refuses ``mmap`` and ctypes first).

Expected: seccomp's W^X rule: every attempt is EPERM; the objective can still import an
extension module it had not imported (a file mapping, read-only).
"""

import ctypes
import errno
import json
import mmap
import os

out = {}
RWX = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC


def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))


attempt("anonymous rwx", lambda: mmap.mmap(-1, 4096, prot=RWX))
attempt("anonymous rx", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC))


def dev_zero():
    fd = os.open("/dev/zero", os.O_RDONLY)
    mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=RWX)


attempt("/dev/zero rwx", dev_zero)
libc = ctypes.CDLL(None, use_errno=True)
page = mmap.mmap(-1, 4096)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
result = libc.mprotect(ctypes.c_void_p(address), 4096, mmap.PROT_READ | mmap.PROT_EXEC)
out["mprotect rx"] = "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
import _decimal  # noqa: E402,F401 - an extension module nothing imported before

out["import extension"] = "ok"
print("RESULT " + json.dumps(out), flush=True)
raise RuntimeError("RESULT " + json.dumps(out))
