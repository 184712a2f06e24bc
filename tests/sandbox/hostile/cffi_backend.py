"""Calls libc directly through Debian's ``_cffi_backend``, a native module the guard never
hears of: it is not ctypes (no ``ctypes.*`` audit event), it lies under /usr/lib (a read
root of the sandbox: /usr/lib/python3/dist-packages), and importing an extension module
raises no event the guard refuses. ``load_library(None)`` opens the running program, whose
libc functions it then calls: open() of /etc/passwd, open() of a new file in /tmp,
socket() and connect() to the test's TCP server, fork(), system(), kill() of the
worker's pid and of a canary process, and mmap() of anonymous executable memory. Prints
what each returned (and errno), then trains as plain cross-entropy.

Expected: the guard sees nothing; the kernel refuses every call: ENOENT or EACCES for
the files (the minimal root, Landlock), EROFS where the root is read-only, EPERM for
socket(), fork() and the executable mapping (seccomp), system() starts no shell (glibc
returns status 127 when it cannot spawn one), ESRCH or EPERM for the signals (PID
namespace, Landlock's signal scope). The cell is ``ok``, scores as plain cross-entropy;
nothing outside changed. Where this machine has no Debian ``_cffi_backend`` for this
Python, it says so and only trains (the test skips).
"""

import glob
import os
import sys

import torch.nn.functional as F

ESCAPE = "__HOSTILE_ESCAPE__"
PORT = int("__HOSTILE_TCP_PORT__")
TEST_PID = int("__HOSTILE_TEST_PID__")
CANARY_PID = int("__HOSTILE_CANARY_PID__")
DIST = "/usr/lib/python3/dist-packages"
TAG = f"cpython-{sys.version_info.major}{sys.version_info.minor}"

found = glob.glob(f"{DIST}/_cffi_backend.{TAG}-*.so")
if not found:
    print(f"no _cffi_backend for {TAG} in {DIST}", flush=True)
else:
    sys.path.append(DIST)
    import _cffi_backend as backend

    print(f"loaded {backend.__file__}", flush=True)
    libc = backend.load_library(None)
    INT, LONG, SIZE = (backend.new_primitive_type(t) for t in ("int", "long", "size_t"))
    CHARP = backend.new_pointer_type(backend.new_primitive_type("char"))
    VOIDP = backend.new_pointer_type(backend.new_void_type())

    def function(name, result, *args):
        return libc.load_function(backend.new_function_type(args, result, False), name)

    c_open = function("open", INT, CHARP, INT, INT)
    c_read = function("read", LONG, INT, CHARP, SIZE)
    c_socket = function("socket", INT, INT, INT, INT)
    c_connect = function("connect", INT, INT, CHARP, INT)
    c_fork = function("fork", INT)
    c_system = function("system", INT, CHARP)
    c_kill = function("kill", INT, INT, INT)
    c_mmap = function("mmap", VOIDP, VOIDP, SIZE, INT, INT, INT, LONG)
    c_exit = function("_exit", INT, INT)

    def report(name, value, failed):
        errno = backend.get_errno() if failed else 0
        print(f"{name}: returned {value} errno {errno}", flush=True)

    buffer = backend.newp(backend.new_array_type(CHARP, 64), b"")
    fd = c_open(b"/etc/passwd", os.O_RDONLY, 0)
    report("open /etc/passwd", fd, fd < 0)
    if fd >= 0:
        print("read /etc/passwd:", c_read(fd, buffer, 63), backend.string(buffer), flush=True)
    fd = c_open(ESCAPE.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    report("open outside for writing", fd, fd < 0)
    s = c_socket(2, 1, 0)  # AF_INET, SOCK_STREAM
    report("socket", s, s < 0)
    if s >= 0:
        address = bytes([2, 0, PORT >> 8, PORT & 255, 127, 0, 0, 1]) + bytes(8)
        result = c_connect(s, address, 16)
        report("connect", result, result < 0)
    pid = c_fork()
    if pid == 0:
        os.mkdir(f"{ESCAPE}.fork")
        c_exit(0)
    report("fork", pid, pid < 0)
    status = c_system(f"mkdir {ESCAPE}.system".encode())
    report("system", status, status == -1)
    for name, target in (("kill the worker", TEST_PID), ("kill the canary", CANARY_PID)):
        result = c_kill(target, 9)
        report(name, result, result < 0)
    mapped = c_mmap(backend.cast(VOIDP, 0), 4096, 7, 0x22, -1, 0)  # RWX, PRIVATE|ANONYMOUS
    address = int(backend.cast(LONG, mapped))
    report("mmap executable", address, address == -1)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
