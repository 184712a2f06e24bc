"""Run without the Python guard: tries six ways of starting a process - os.fork,
os.posix_spawn, subprocess, and (on x86-64) through ctypes the raw fork, clone and
clone3 system calls - each child (if any) calling setsid() and sleeping 10 minutes in a marker
directory; prints each refusal, then raises the first.

Expected: the seccomp filter refuses every one (EPERM; ENOSYS for clone3, so that the C
library falls back to clone): ``failed``/``objective`` with "Operation not permitted",
no marker directory and no surviving process.
"""

import ctypes
import os
import platform
import signal
import subprocess
import time

import torch.nn.functional as F

MARKER = "__HOSTILE_MARKER__"
libc = ctypes.CDLL(None, use_errno=True)


def _grandchild():
    try:
        os.setsid()
        os.mkdir(MARKER)
        os.chdir(MARKER)
        time.sleep(600)
    finally:
        os._exit(0)


def _raw(number, *args):
    def call():
        pid = libc.syscall(number, *args)
        if pid < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        if pid == 0:
            _grandchild()
        return pid
    return call


def _fork():
    if (pid := os.fork()) == 0:
        _grandchild()
    return pid


clone_args = (ctypes.c_uint64 * 11)(0, 0, 0, 0, signal.SIGCHLD)  # struct clone_args
WAYS = {
    "os.fork": _fork,
    "os.posix_spawn": lambda: os.posix_spawn("/bin/sleep", ["sleep", "600"], {}),
    "subprocess": lambda: subprocess.Popen(["sleep", "600"]).pid,
}
if platform.machine() == "x86_64":  # the raw system call numbers are x86-64's
    WAYS["fork(2)"] = _raw(57)
    WAYS["clone(2)"] = _raw(56, signal.SIGCHLD, 0, 0, 0, 0)
    WAYS["clone3(2)"] = _raw(435, ctypes.byref(clone_args), ctypes.sizeof(clone_args))
errors = []
for way, start in WAYS.items():
    try:
        print(f"{way}: started {start()}")
    except OSError as exc:
        print(f"{way}: refused: {exc}")
        errors.append(exc)
time.sleep(0.5)
print("grandchild running:", os.path.isdir(MARKER))
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
