"""The sandbox's Python-level layer: an audit hook that refuses what a trainer never needs.

It is the second layer, behind the kernel's (network namespace, Landlock, rlimits):
refusals here give the objective's owner a readable message and are recorded, so a
cell whose objective tried something forbidden is reported as a sandbox violation
even when the objective swallowed the exception. Audit hooks cannot be removed once
added (PEP 578).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

# Events refused outright: network, processes, native code, debuggers.
_REFUSED = {
    "socket.__new__": "opening a network socket", "socket.connect": "network access",
    "socket.bind": "network access", "socket.getaddrinfo": "name resolution",
    "socket.gethostbyname": "name resolution", "socket.gethostbyaddr": "name resolution",
    "urllib.Request": "network access", "http.client.connect": "network access",
    "subprocess.Popen": "starting a process", "os.system": "starting a process",
    "os.exec": "starting a program", "os.posix_spawn": "starting a process",
    "os.spawn": "starting a process", "os.fork": "forking a process",
    "os.forkpty": "forking a process", "pty.spawn": "starting a process",
    "ctypes.dlopen": "loading native code", "ctypes.dlsym": "calling native code",
    "ctypes.cdata": "raw memory access", "ctypes.call_function": "calling native code",
    "os.kill": "signalling a process", "os.killpg": "signalling a process",
    "sys._current_frames": "inspecting the harness", "sys.setprofile": "tracing the harness",
    "sys.settrace": "tracing the harness", "mmap.__new__": "mapping files into memory",
}
# Events carrying a path as their first argument that may only touch the work directory.
_PATH_WRITES = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                "os.link", "os.symlink", "os.truncate", "os.utime", "shutil.rmtree",
                "shutil.copyfile", "shutil.move", "os.chdir"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(PermissionError):
    """The objective did something a trainer may not do."""


class Guard:
    def __init__(self, read: Iterable[str], write: Iterable[str]) -> None:
        self.read = tuple(_real(p) for p in read)
        self.write = tuple(_real(p) for p in write)
        self.violations: list[str] = []

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if event in _REFUSED:
            if event == "os.kill" and args and args[0] == os.getpid():
                return  # signalling itself is the process's own business
            self._refuse(f"{_REFUSED[event]} ({event})")
        elif event == "open":
            path, mode, flags = (list(args) + [None, None])[:3]
            if path is None or isinstance(path, int):
                return  # an already-open descriptor
            writing = ((isinstance(mode, str) and any(c in mode for c in "wax+"))
                       or (isinstance(flags, int) and flags & _WRITE_FLAGS))
            self._check_path(path, writing)
        elif event in _PATH_WRITES and args:
            if not isinstance(args[0], int):
                self._check_path(args[0], True)

    def _check_path(self, path: object, writing: bool) -> None:
        try:
            real = _real(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        allowed = self.write if writing else self.read + self.write
        if not any(real == root or real.startswith(root.rstrip("/") + "/") for root in allowed):
            self._refuse(f"{'writing' if writing else 'reading'} {real}")

    def _refuse(self, what: str) -> None:
        message = f"sandbox: {what} is not allowed"
        if len(self.violations) < 50:
            self.violations.append(message)
        raise SandboxViolation(message)


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))
