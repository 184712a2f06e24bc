"""The minimal root of a sandboxed job and its tmpfs work directory, built by the job's
init (:mod:`harness.sandbox.zygote`) in the job's new mount namespace.

The root is a small read-only tmpfs holding read-only bind mounts of what the child may
read (``harness.sandbox.child.read_roots``, at the same absolute paths), ``/dev/null``
(and the GPU's devices), a fresh ``/proc`` (``hidepid``, and only the processes' entries
where the kernel offers ``subset=pid``) and the work directory, which is a tmpfs of its
own whose size is the disk quota (``RLIMIT_FSIZE``): the kernel answers ENOSPC at the
quota, whatever the objective does (files unlinked while open, paths deeper than
PATH_MAX). init copies what the parent wrote into the work directory (job.json, the
objective, its inputs, tmp/) into that tmpfs before the job starts, and the job's outputs
(``OUTPUT_FILES``) back out when it ends; then it ``pivot_root``s into it. Nothing else of
the machine exists for the job: no other job's directory, no host file to ``stat``,
``readlink`` or watch with inotify. What to mount is worked out once per fork server
(:func:`plan`); each job's init only makes directories and mounts.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_LIBC = ctypes.CDLL(None, use_errno=True)
# What init copies from the job's tmpfs work directory to the parent's when the job ends
# (the validator's report): regular files only (never a link), each at most the disk quota.
OUTPUT_FILES = ("result.json",)
ROOT_TMPFS = "size=4m,nr_inodes=16384,mode=0755"  # directories and mount points only


def build(request: dict) -> tuple[int, int]:
    """In init, in the job's new mount namespace: a root holding only what the job may
    read (read-only bind mounts at the same paths), its tmpfs work directory, ``/dev/null``
    and a fresh ``/proc``; then ``pivot_root`` into it. Returns descriptors of the parent's
    work directory (where the outputs go) and of the job's (the tmpfs)."""
    _mount(b"none", b"/", None, MS_REC | MS_PRIVATE)
    workdir = os.path.realpath(request["workdir"])
    device = request.get("device", "cpu")
    host_dir = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    # The new root is built on a tmpfs mounted over the work directory itself (a path that
    # exists and that nothing else uses in this namespace); host_dir still reaches the
    # parent's files underneath.
    new = workdir
    _mount(b"tmpfs", new.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           ROOT_TMPFS.encode())
    steps = plan(device)
    for op, path, arg in steps:
        target = new + path
        if op == "dir":
            os.mkdir(target, arg[0])
        elif op == "file":
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        elif op == "bind":
            _mount(path.encode(), target.encode(), None, MS_BIND)
            _mount(b"none", target.encode(), None, MS_REMOUNT | MS_BIND | arg)
        elif op == "link":
            os.symlink(arg, target)
    # the work directory: a tmpfs of the disk quota, mode 0700, owned by the job's uid
    made = {path for op, path, _ in steps if op == "dir"}
    _ensure_dir(new, workdir, made)
    uid = request.get("uid") or 0
    size = quota(request)
    inodes = min(max(size // 16384, 1024), 65536)
    _mount(b"tmpfs", (new + workdir).encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={uid}".encode())
    _copy_in(host_dir, new + workdir)
    if workdir != os.path.normpath(request["workdir"]):
        _mirror_links(new, request["workdir"], made)
    # /proc of this PID namespace only; where the kernel allows, without what is not a
    # process (the machine's command line, load, mounts, ...) and without processes of other
    # uids; a GPU's driver needs /proc/driver/nvidia
    proc = (new + "/proc").encode()
    options = (["hidepid=invisible", "subset=pid"] if not device.startswith("cuda")
               else ["hidepid=invisible"])
    for attempt in (options, options[:1], []):  # older kernels: fewer options
        try:
            _mount(b"proc", proc, b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   ",".join(attempt).encode() or None)
            break
        except OSError as exc:
            if exc.errno != errno.EINVAL or not attempt:
                raise
    # Every directory made here keeps the machine's times: the import system's cache of a
    # directory's listing stays valid while its mtime is unchanged (Landlock lets the job
    # read the stdlib's and site-packages' entries, not list them).
    for path in made - {"/proc", workdir}:
        try:
            st = os.stat(path)
            os.utime(new + path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        except OSError:  # not on the machine, or inside a read-only bind mount
            continue
    _mount(b"none", new.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
           | MS_NODEV | MS_NOEXEC)
    os.chdir(new)
    if _LIBC.syscall(_PIVOT_ROOT[platform.machine()], b".", b".") != 0:
        raise OSError(ctypes.get_errno(), "pivot_root failed")
    if _LIBC.umount2(b".", MNT_DETACH) != 0:  # the old root, stacked on the new one
        raise OSError(ctypes.get_errno(), "umount of the old root failed")
    os.chdir("/")
    work_dir = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return host_dir, work_dir


@functools.cache
def plan(device: str) -> tuple[tuple[str, str, object], ...]:
    """What a job's root holds, as steps relative to it: ("dir", path, (mode,)), ("file",
    path, None) mount points, ("bind", real path, mount flags), ("link", path, target).
    Worked out once per fork server (the read roots do not change while it lives), so that
    each job's init only makes directories and mounts (a few milliseconds)."""
    from pathlib import Path

    from harness.sandbox.child import read_roots, write_roots

    nowhere = Path("/nonexistent-work-directory")  # the work directory is each job's own
    reads = [p for p in read_roots(nowhere, True, device)
             if not _under(_real(p), "/proc")]  # a /proc of its own instead
    writes = [p for p in write_roots(nowhere, device) if p != str(nowhere)]
    plan: list[tuple[str, str, object]] = []
    made: set[str] = set()

    def ensure(path: str) -> None:
        current = ""
        for part in [p for p in path.split("/") if p]:
            current += "/" + part
            if current not in made and current not in bound:
                made.add(current)
                try:
                    mode = stat.S_IMODE(os.stat(current).st_mode) & 0o1777
                except OSError:
                    mode = 0o755
                plan.append(("dir", current, (mode,)))

    bound: set[str] = set()
    for paths, writable in ((reads, False), (writes, True)):
        for real in _outermost(paths):
            st = os.stat(real)
            device_node = stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                ensure(real)
            else:
                ensure(os.path.dirname(real))
                plan.append(("file", real, None))
            # A plain (not recursive) bind: a mount below a root shows only its mount point.
            flags = (MS_NOSUID | (MS_NOEXEC if device_node else MS_NODEV)
                     | (0 if writable else MS_RDONLY))
            plan.append(("bind", real, flags))
            bound.add(real)
    for path in [*reads, *writes]:  # e.g. /lib -> usr/lib, as on the machine
        for link, target in _links_to(path):
            if link not in made and link not in bound:
                ensure(os.path.dirname(link))
                made.add(link)
                plan.append(("link", link, target))
    ensure("/proc")
    return tuple(plan)


def quota(request: dict) -> int:
    """The disk quota: the file-size limit (``RLIMIT_FSIZE``) of the request."""
    value = request["limits"].get("RLIMIT_FSIZE", [512 << 20])
    size = int(value[0] if isinstance(value, list | tuple) else value)
    return size if 0 < size < 1 << 62 else 512 << 20


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _outermost(paths: list[str]) -> list[str]:
    """The real locations of ``paths`` that exist, minus those under another one (already
    part of its bind mount)."""
    reals = {_real(p) for p in paths if os.path.exists(p)}
    kept = []
    for real in sorted(reals):
        parts = real.split("/")
        if not any("/".join(parts[:i]) in reals for i in range(2, len(parts))):
            kept.append(real)
    return kept


def _ensure_dir(new: str, path: str, made: set[str]) -> None:
    """``path`` (a real path: no symbolic links) as directories under ``new``; each one
    created here gets the mode of the machine's directory (one closed to others stays
    closed to a job of another uid)."""
    current = ""
    for part in [p for p in path.split("/") if p]:
        current += "/" + part
        if current in made:
            continue
        made.add(current)
        try:
            os.mkdir(new + current, 0o700)
        except FileExistsError:
            continue  # inside a bind mount, or a mount point made before
        try:
            mode = stat.S_IMODE(os.stat(current).st_mode) & 0o1777
        except OSError:
            mode = 0o755
        os.chmod(new + current, mode)


def _links_to(path: str) -> list[tuple[str, str]]:
    """The symbolic links on the way to ``path``, as (link, target), in order."""
    links, pending = [], path
    for _ in range(40):
        current, parts = "", [p for p in pending.split("/") if p]
        for i, part in enumerate(parts):
            current += "/" + part
            if os.path.islink(current):
                target = os.readlink(current)
                links.append((current, target))
                pending = os.path.normpath(os.path.join(os.path.dirname(current), target,
                                                        *parts[i + 1:]))
                break
        else:
            break
    return links


def _mirror_links(new: str, path: str, made: set[str]) -> None:
    """The symbolic links on the way to ``path``, recreated under ``new`` with the same
    targets, so that the path resolves there as it does here."""
    for link, target in _links_to(path):
        if not os.path.lexists(new + link):
            _ensure_dir(new, os.path.dirname(link), made)
            os.symlink(target, new + link)


def _copy_in(source_dir: int, target: str) -> None:
    """What the parent wrote into the work directory (job.json, the objective, tmp/),
    into the job's tmpfs with the same modes and owners (regular files and directories)."""
    for dirpath, _, filenames, dir_fd in os.fwalk(".", dir_fd=source_dir):
        here = os.path.normpath(os.path.join(target, dirpath))
        st = os.fstat(dir_fd)
        if dirpath != ".":
            os.mkdir(here, 0o700)
            os.chmod(here, stat.S_IMODE(st.st_mode))
        os.chown(here, st.st_uid, st.st_gid)
        for name in filenames:
            try:
                src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                              dir_fd=dir_fd)
            except OSError:  # a symbolic link: not something the parent writes
                continue
            try:
                info = os.fstat(src)
                if not stat.S_ISREG(info.st_mode):
                    continue
                dst = os.open(os.path.join(here, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL
                              | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    _copy_fd(src, dst, info.st_size)
                    os.fchown(dst, info.st_uid, info.st_gid)
                    os.fchmod(dst, stat.S_IMODE(info.st_mode))
                finally:
                    os.close(dst)
            finally:
                os.close(src)


def copy_outputs(work_dir: int, host_dir: int, limit: int) -> None:
    """The job's outputs, from its tmpfs to the parent's work directory: regular files
    named in ``OUTPUT_FILES`` only (a link or a FIFO is left behind), at most ``limit``
    bytes each."""
    for name in OUTPUT_FILES:
        try:
            src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                          dir_fd=work_dir)
        except OSError:
            continue
        try:
            info = os.fstat(src)
            if not stat.S_ISREG(info.st_mode):
                continue
            try:
                os.unlink(name, dir_fd=host_dir)
            except FileNotFoundError:
                pass
            dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600, dir_fd=host_dir)
            try:
                _copy_fd(src, dst, min(info.st_size, limit))
            finally:
                os.close(dst)
        finally:
            os.close(src)


def _copy_fd(src: int, dst: int, size: int) -> None:
    offset = 0
    while offset < size:
        sent = os.sendfile(dst, src, offset, min(size - offset, 1 << 30))
        if sent == 0:
            break
        offset += sent


def _mount(source: bytes, target: bytes, fstype: bytes | None, flags: int,
           data: bytes | None = None) -> None:
    if _LIBC.mount(source, target, fstype, flags, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target.decode(errors='replace')} failed: "
                           f"{os.strerror(err)}")

