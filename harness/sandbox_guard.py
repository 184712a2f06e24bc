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
    "gc.get_objects": "inspecting the harness", "gc.get_referrers": "inspecting the harness",
    "gc.get_referents": "inspecting the harness",
}
# Events carrying a path as their first argument that may only touch the work directory.
_PATH_WRITES = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                "os.link", "os.symlink", "os.truncate", "os.utime", "shutil.rmtree",
                "shutil.copyfile", "shutil.move", "os.chdir", "os.mkfifo", "os.mknod"}
# Of those, the ones whose second argument is a path written too (the destination).
_TWO_PATHS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move"}
_PATH_READS = {"os.listdir", "os.scandir"}
MARKER = "[sandbox violation] "  # streamed to stderr as it happens: the parent records it
VIOLATION_EXIT = 73  # the child's exit status after a refusal: nothing runs past one
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(PermissionError):
    """The objective did something a trainer may not do."""


class Guard:
    """The hook's state and helpers are bound in a closure at install time. A refusal is
    written to stderr and ends the process at once (status ``VIOLATION_EXIT``), so an
    objective can neither catch it nor erase the record; the parent reports the cell as
    killed for a violation. Still best effort: the kernel layers are what is relied on."""

    def __init__(self, read: Iterable[str], write: Iterable[str]) -> None:
        self.read = tuple(_real(p) for p in read)
        self.write = tuple(_real(p) for p in write)
        self.violations: list[str] = []

    def install(self) -> None:
        sys.addaudithook(_hook(self.read, self.write, self.violations))


def _hook(read: tuple[str, ...], write: tuple[str, ...], record: list[str]):
    refused = tuple(_REFUSED.items())
    refused_names = frozenset(_REFUSED)
    path_writes, two_paths, path_reads = (frozenset(_PATH_WRITES), frozenset(_TWO_PATHS),
                                          frozenset(_PATH_READS))
    readable = read + write
    pid = os.getpid()
    emit, end, fsdecode = os.write, os._exit, os.fsdecode
    realpath, abspath = os.path.realpath, os.path.abspath

    def refuse(what: str) -> None:
        message = f"sandbox: {what} is not allowed"
        if len(record) < 50:
            record.append(message)
        try:
            emit(2, f"\n{MARKER}{message}\n".encode())
        finally:
            end(VIOLATION_EXIT)

    def check(path: object, writing: bool, listing: bool = False) -> None:
        try:
            real = realpath(abspath(fsdecode(path)))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        allowed = write if writing else readable
        if any(real == root or real.startswith(root.rstrip("/") + "/") for root in allowed):
            return
        if listing and any(root.startswith(real.rstrip("/") + "/") for root in allowed):
            return  # the import system lists the directories above what it may read
        refuse(f"{'writing' if writing else 'listing' if listing else 'reading'} {real}")

    def hook(event: str, args: tuple) -> None:
        if event in refused_names:
            if event == "os.kill" and args and args[0] == pid:
                return  # signalling itself is the process's own business
            refuse(f"{dict(refused)[event]} ({event})")
        elif event == "open":
            path, mode, flags = (list(args) + [None, None])[:3]
            if path is None or isinstance(path, int):
                return  # an already-open descriptor
            writing = ((isinstance(mode, str) and any(c in mode for c in "wax+"))
                       or (isinstance(flags, int) and flags & _WRITE_FLAGS))
            check(path, bool(writing))
        elif event in path_writes and args:
            if not isinstance(args[0], int):
                check(args[0], True)
            if event in two_paths and len(args) > 1 and not isinstance(args[1], int):
                check(args[1], True)
        elif event in path_reads and args and args[0] is not None \
                and not isinstance(args[0], int):
            check(args[0], False, listing=True)

    return hook


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))
