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
                "shutil.copyfile", "shutil.move", "os.chdir", "os.mkfifo", "os.mknod",
                "os.setxattr", "os.removexattr", "os.chflags", "os.lchflags", "os.lchmod"}
# Of those, the ones whose second argument is a path written too (the destination).
_TWO_PATHS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move"}
_PATH_READS = {"os.listdir", "os.scandir"}
MARKER = "[sandbox violation] "  # starts each report line
REPORT_FD = 4  # the parent's report pipe; stderr where there is none (the parent ignores it)
VIOLATION_EXIT = 73  # the child's exit status after a refusal: nothing runs past one
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(PermissionError):
    """The objective did something a trainer may not do."""


class Guard:
    """The hook's state and helpers are bound in a closure at install time. A refusal is
    written to the report pipe and ends the process at once (status ``VIOLATION_EXIT``), so an
    objective can neither catch it nor erase the record; the parent reports the cell as
    killed for a violation. Still best effort: the kernel layers are what is relied on."""

    def __init__(self, read: Iterable[str], write: Iterable[str]) -> None:
        self.read = tuple(_real(p) for p in read)
        self.write = tuple(_real(p) for p in write)

    def install(self) -> None:
        sys.addaudithook(_hook(self.read, self.write))
        _unplug_fork_exec()


def _unplug_fork_exec() -> None:
    """``_posixsubprocess.fork_exec`` starts processes without an audit event: every
    reference to it is replaced by a stub that raises one (so the guard refuses it), and
    importing the module afresh is refused by the hook."""
    import _posixsubprocess

    original, audit = _posixsubprocess.fork_exec, sys.audit

    def fork_exec(*args: object, **kwargs: object) -> None:
        audit("os.fork")
        raise SandboxViolation("sandbox: forking a process is not allowed")

    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                setattr(module, name, fork_exec)


def _hook(read: tuple[str, ...], write: tuple[str, ...]):
    """The audit hook. Everything it calls is bound here, at install time (builtins,
    ``posix`` functions, the marker and the exit status), and anything unexpected while
    it checks an event (an odd argument, a patched helper raising) ends the process as a
    violation: the hook fails closed."""
    import pathlib
    import posix
    import signal

    refused = dict(_REFUSED)
    path_writes, two_paths, path_reads = (frozenset(_PATH_WRITES), frozenset(_TWO_PATHS),
                                          frozenset(_PATH_READS))
    readable = read + write
    pid, exit_status, marker = posix.getpid(), VIOLATION_EXIT, MARKER
    emit, end, fstat, set_blocking = posix.write, posix._exit, posix.fstat, os.set_blocking
    lstat, stat, readlink, getcwd = posix.lstat, posix.stat, posix.readlink, posix.getcwd
    sigmask, quiet = signal.pthread_sigmask, {signal.SIGPIPE, signal.SIGXFSZ}
    try:  # the report pipe, which nothing but this hook writes to when the guard is on
        report = REPORT_FD
        reported = (fstat(report).st_dev, fstat(report).st_ino)
    except OSError:
        report, reported = 2, (fstat(2).st_dev, fstat(2).st_ino)
    str_, bytes_, int_, len_, any_, isinstance_, type_ = (str, bytes, int, len, any,
                                                          isinstance, type)
    base_exception, path_types = BaseException, (pathlib.PosixPath, pathlib.PurePosixPath)
    fspath_of_path = pathlib.PurePath.__fspath__
    plain, plain_bytes = str.__add__, bytes.__add__
    decode = bytes.decode
    write_flags = _WRITE_FLAGS
    refused_imports = frozenset({"_posixsubprocess"})

    def refuse(what: str) -> None:
        try:
            message = f"sandbox: {what} is not allowed"
            sigmask(signal.SIG_BLOCK, quiet)  # a closed or full pipe cannot stop the exit
            st = fstat(report)
            if (st.st_dev, st.st_ino) == reported:
                set_blocking(report, False)
                emit(report, ("\n" + marker + message + "\n").encode())
        except base_exception:
            pass
        finally:
            end(exit_status)

    def text(path: object) -> str:
        """The path as a plain str, without calling anything the objective can replace."""
        if isinstance_(path, str_):
            return plain("", path)
        if isinstance_(path, bytes_):
            return decode(plain_bytes(b"", path), "utf-8", "surrogateescape")
        if type_(path) in path_types and type_(path).__fspath__ is fspath_of_path:
            return plain("", fspath_of_path(path))
        raise TypeError("a path must be str, bytes or a plain pathlib path")

    def resolve(path: str) -> str:
        """Absolute, normalised, symlinks followed (as far as they exist), via posix only."""
        if not path.startswith("/"):
            path = getcwd() + "/" + path
        pending = [p for p in path.split("/") if p]
        pending.reverse()
        parts: list[str] = []
        hops = 0
        while pending:
            part = pending.pop()
            if part == ".":
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            candidate = "/" + "/".join(parts + [part])
            try:
                is_link = (lstat(candidate).st_mode & 0o170000) == 0o120000
            except OSError:
                is_link = False
            if not is_link:
                parts.append(part)
                continue
            hops += 1
            if hops > 40:
                raise OSError("too many symbolic links")
            target = readlink(candidate)
            if target.startswith("/"):
                parts = []
            rest = [p for p in target.split("/") if p]
            rest.reverse()
            pending.extend(rest)
        return "/" + "/".join(parts)

    def inside(real: str, roots: tuple[str, ...]) -> bool:
        return any_(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)

    def check(path: object, writing: bool, listing: bool = False) -> str:
        real = resolve(text(path))
        if inside(real, write if writing else readable):
            return real
        if listing and any_(root.startswith(real.rstrip("/") + "/") for root in readable):
            return real  # the import system lists the directories above what it may read
        refuse(("writing " if writing else "listing " if listing else "reading ") + real)

    def body(event: str, args: tuple) -> None:
        if event == "import":
            if args and type_(args[0]) is str_ and plain("", args[0]) in refused_imports:
                refuse("importing " + plain("", args[0]))
            return
        if event in refused:
            if event == "os.kill" and args and type_(args[0]) is int_ and args[0] == pid:
                return  # signalling itself is the process's own business
            refuse(refused[event] + " (" + event + ")")
        elif event == "open":
            n = len_(args)
            path = args[0] if n > 0 else None
            if path is None or type_(path) is int_:
                return  # an already-open descriptor
            mode = plain("", args[1]) if n > 1 and isinstance_(args[1], str_) else ""
            flags = args[2] if n > 2 and type_(args[2]) is int_ else 0
            writing = any_(c in mode for c in "wax+") or (flags & write_flags) != 0
            real = check(path, writing)
            # A descriptor of a directory outside the work directory is a dir_fd, and the
            # audit events of dir_fd-relative calls do not carry it: refused when opened.
            if not inside(real, write):
                try:
                    is_dir = (stat(real).st_mode & 0o170000) == 0o040000
                except OSError:
                    is_dir = False
                if is_dir:
                    refuse("opening the directory " + real + " as a descriptor")
        elif event in path_writes and args:
            for arg in (args[:2] if event in two_paths else args[:1]):
                if type_(arg) is int_:  # a descriptor: changing it is a write we cannot place
                    refuse(event + " on a file descriptor")
                check(arg, True)
        elif event in path_reads and args and args[0] is not None:
            if type_(args[0]) is not int_:
                check(args[0], False, listing=True)

    def hook(event: str, args: tuple) -> None:
        try:
            body(event, args)
        except base_exception as exc:  # fail closed: an event the guard could not check
            refuse(f"an action the guard could not check ({event}: {type_(exc).__name__})")

    return hook


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))
