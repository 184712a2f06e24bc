"""A fork server for sandboxed children: ``python -I -m harness.sandbox.zygote FD SUITES``.

Starting Python and importing torch costs ~1.5 s of CPU per child, about a quarter of
a 5-seed cell group on the digits data. The zygote pays it once: it imports the trainer,
starts no threads, holds no secrets (it is started with the sandbox's scrubbed
environment and no database or broker connection) and then forks one fresh process
per job. Each job gets the same isolation as ``unshare … setpriv … python``, and more:

    zygote ─ fork ─ middle: setsid, joins the job's pids and memory cgroups,
                    │       unshare(net, mount, pid, ipc)
                      └ fork ─ init (PID 1 of the new namespace): builds the job's minimal
                               root (below), reaps everything, copies the job's outputs
                               out, reports the job's status
                               └ fork ─ job: stdio to the parent's pipe (or the parent's
                                        channel at 0, 3, 4), every other descriptor
                                        closed, scrubbed environment, rlimits,
                                        capabilities and uid dropped, then
                                        harness.sandbox.child.main (Landlock, seccomp, guard)

The minimal root (with namespaces): a small read-only tmpfs holding read-only bind mounts
of what the child may read (``harness.sandbox.child.read_roots``, at the same absolute
paths), ``/dev/null`` (and the GPU's devices), a fresh ``/proc`` (``hidepid``, and only
the processes' entries where the kernel offers ``subset=pid``) and the work directory,
which is a tmpfs of its own whose size is the disk quota (``RLIMIT_FSIZE``): the kernel
answers ENOSPC at the quota, whatever the objective does (files unlinked while open,
paths deeper than PATH_MAX). init copies what the parent wrote into the work directory
(job.json, the objective, its inputs, tmp/) into that tmpfs before the job starts, and the
job's outputs (``OUTPUT_FILES``) back out when it ends; then it ``pivot_root``s into it.
Nothing else of the machine exists for the job: no other job's directory, no host file to
``stat``, ``readlink`` or watch with inotify.

When the job ends, init reports and exits, and the kernel kills whatever the objective
left in the namespace (without namespaces, init is a child subreaper and kills what
is left itself); the tmpfs and the IPC namespace (System V shared memory, semaphores,
message queues) go with it. Requests and replies are JSON messages on a SOCK_SEQPACKET
socket (descriptor FD); the job's output pipe and channel arrive with the request
(SCM_RIGHTS).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import importlib
import json
import os
import platform
import resource
import select
import shutil
import signal
import socket
import stat
import sys
import time

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = (0x00020000, 0x20000000, 0x40000000,
                                                         0x08000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CGROUP_V1_PIDS = "/sys/fs/cgroup/pids"
CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"
CGROUP_V2 = "/sys/fs/cgroup"
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
_LIBC = ctypes.CDLL(None, use_errno=True)
# What init copies from the job's tmpfs work directory to the parent's when the job ends
# (the validator's report): regular files only (never a link), each at most the disk quota.
OUTPUT_FILES = ("result.json",)
ROOT_TMPFS = "size=4m,nr_inodes=16384,mode=0755"  # directories and mount points only


def main() -> None:
    sys.dont_write_bytecode = True
    import encodings.cp437  # noqa: F401 - zipfile's, for the .npz of inputs
    import zipfile  # noqa: F401

    import numpy  # noqa: F401 - imported once here, shared by every forked job
    import torch

    torch.backends.cpu.get_cpu_capability()  # cpuinfo parsed here: a job's /proc has none
    import harness.objectives.validate  # noqa: F401
    import harness.sandbox.child  # noqa: F401
    import harness.sandbox.traced

    harness.sandbox.traced.warm()  # torch.export imports lazily: once here for every child
    # Every registered suite's pipeline, named by the worker (our environment is scrubbed).
    from harness.contract import registry
    registry.adopt(json.loads(sys.argv[2]) if len(sys.argv) > 2 else [])
    for module in registry.pipeline_modules():
        importlib.import_module(module)
    _root_plan("cpu")  # worked out once, here; every job's init only mounts

    control = socket.socket(fileno=int(sys.argv[1]))
    control.sendall(b'{"ready": true}')
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return  # the worker went away: so do we
        request = json.loads(message)
        if request.get("clone"):  # a copy of this fork server on the socket that came along
            control = _clone(control, fds)
            continue
        status_read, status_write = os.pipe()
        if request["namespaces"]:
            _root_plan(request.get("device", "cpu"))  # once per device, in this process
        cgroups = _job_cgroups(request)
        middle = os.fork()
        if middle == 0:
            control.close()
            os.close(status_read)
            _middle(request, fds, status_write, cgroups)
        for fd in fds:
            os.close(fd)
        os.close(status_write)
        namespaces = bool(request["namespaces"])
        control.sendall(json.dumps({
            "pid": middle, "pids_cgroup": bool(cgroups["pids"]),
            "memory_cgroup": bool(cgroups["memory"]),
            # with namespaces, init builds both or the job never starts (a setup error)
            "tmpfs_workdir": namespaces, "minimal_root": namespaces}).encode())
        wait_status, usage = _wait(middle, control, request["workdir"])
        for path in dict.fromkeys(p for p in cgroups.values() if p):
            _remove_cgroup(path)
        with os.fdopen(status_read, "rb") as f:
            reported = f.read(200).decode(errors="replace").strip().splitlines()
        control.sendall(json.dumps({
            "job": reported[0] if reported else None,
            "middle": os.waitstatus_to_exitcode(wait_status),
            "cpu": usage.ru_utime + usage.ru_stime}).encode())


def _clone(control: socket.socket, fds: list[int]) -> socket.socket:
    """Fork a copy of this fork server (torch imported, no threads) that serves the socket
    ``fds[0]``; returns the socket this process goes on serving. The copy is detached
    (double fork), so nothing here waits for it; it ends when its worker closes its socket.
    A worker running several sandboxed processes at once (one per member) gets fork servers
    in milliseconds instead of a fresh interpreter each."""
    first = os.fork()
    if first == 0:
        if os.fork() != 0:
            os._exit(0)
        control.close()
        for fd in fds[1:]:
            os.close(fd)
        clone = socket.socket(fileno=fds[0])
        clone.sendall(json.dumps({"ready": True, "pid": os.getpid()}).encode())
        return clone
    os.waitpid(first, 0)
    for fd in fds:
        os.close(fd)
    control.sendall(b'{"cloned": true}')
    return control


def _wait(middle: int, control: socket.socket, workdir: str) -> tuple[int, object]:
    """Wait for the job; if the worker goes away meanwhile (its end of the socket closes),
    kill the job and leave: no sandbox outlives the worker that supervises it."""
    while True:
        pid, status, usage = os.wait4(middle, os.WNOHANG)
        if pid:
            return status, usage
        readable, _, _ = select.select([control], [], [], 0.2)
        if readable and not control.recv(1 << 16):
            for kill in (lambda: os.killpg(middle, signal.SIGKILL),
                         lambda: os.kill(middle, signal.SIGKILL)):
                try:
                    kill()
                except OSError:
                    pass
            os.waitpid(middle, 0)
            shutil.rmtree(workdir, ignore_errors=True)  # its owner cannot any more
            os._exit(0)


def _middle(request: dict, fds: list[int], status_fd: int, cgroups: dict) -> None:
    """Own session, the job's cgroups, new namespaces, then the namespace's init."""
    try:
        os.setsid()
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for path in dict.fromkeys(p for p in cgroups.values() if p):
            # every process and thread of the job counts against pids.max; every page it
            # (or its tmpfs) uses against the memory limit
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        namespaces = request["namespaces"]
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
        if namespaces and _LIBC.unshare(flags) != 0:
            os.write(status_fd, b"setup:unshare failed\n")
            os._exit(70)
        init = os.fork()
        if init == 0:
            _init(request, fds, status_fd, namespaces)
        for fd in fds:
            os.close(fd)
        os.close(status_fd)
        _, status = os.waitpid(init, 0)
        os._exit(0 if os.waitstatus_to_exitcode(status) == 0 else 70)
    except BaseException:  # noqa: BLE001 - never return into the zygote's loop
        os._exit(70)


def _init(request: dict, fds: list[int], status_fd: int, namespaces: bool) -> None:
    """PID 1 of the sandbox: the minimal root, reaps every process, copies the outputs out,
    reports the job's end."""
    try:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        host_dir = work_dir = None
        if namespaces:
            host_dir, work_dir = _minimal_root(request)
        else:  # orphans come back to this process instead of the machine's init
            _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        job = os.fork()
        if job == 0:
            os.close(status_fd)
            _job(request, fds)
        for fd in fds:
            os.close(fd)
        while True:  # reap orphans until the job itself ends
            pid, status = os.wait()
            if pid == job:
                break
        if os.WIFSIGNALED(status):
            line = f"signal:{os.WTERMSIG(status)}"
        else:
            line = f"exit:{os.waitstatus_to_exitcode(status)}"
        if not namespaces:
            _kill_children()
        elif work_dir is not None and host_dir is not None:
            _kill_children()  # nothing may change the outputs while they are copied
            _copy_outputs(work_dir, host_dir, _quota(request))
        os.write(status_fd, line.encode() + b"\n")
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(status_fd, f"setup:{type(exc).__name__}: {exc}"[:190].encode() + b"\n")
        finally:
            os._exit(70)


def _job(request: dict, fds: list[int]) -> None:
    """The untrusted side: nothing inherited but its inputs, no privileges, limits set."""
    try:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # fds: the output pipe, then (requests, replies, report) when the parent gave them;
        # moved out of the way first, as they may already sit on 0-4.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(high[1] if len(high) == 4 else devnull, 0)
        os.dup2(high[0], 1)
        os.dup2(high[0], 2)
        if len(high) == 4:
            os.dup2(high[2], 3, inheritable=False)
            os.dup2(high[3], 4, inheritable=False)
        os.closerange(5 if len(high) == 4 else 3, _max_fd())
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(request["workdir"])
        os.environ.clear()
        os.environ.update(request["env"])
        _drop_privileges(request.get("uid"))
        limits = request["limits"]
        for name, value in limits.items():
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, name), (soft, hard))
        sys.argv = ["harness.sandbox.child", request["workdir"]]
        from pathlib import Path

        from harness.sandbox.child import main as child_main

        child_main(Path(request["workdir"]))
    except BaseException as exc:  # noqa: BLE001 - an unreported end is a crash, never the zygote's
        import traceback

        traceback.print_exc()
        if _out_of_space(exc):  # e.g. its report, with its tmpfs full: the quota ended it,
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # as the file-size limit would
            os.kill(os.getpid(), signal.SIGXFSZ)
    finally:
        os._exit(70)


def _out_of_space(exc: BaseException) -> bool:
    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return True
    return False


def _drop_privileges(uid: int | None) -> None:
    if os.geteuid() != 0:
        return
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to a plain uid: every capability goes
        return
    for cap in range(64):  # root stays root, but with no capability at all
        _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this pid
    data = (ctypes.c_uint32 * 6)()
    if _LIBC.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _job_cgroups(request: dict) -> dict[str, str | None]:
    """The job's fresh cgroups, where the machine lets this process create them: ``pids``
    (processes and threads at most ``RLIMIT_NPROC``) and ``memory`` (the job's memory limit:
    ``memory_bytes``, else ``RLIMIT_AS``; no swap). cgroup v1: one per controller; v2: one
    with both."""
    limits = request["limits"]
    nproc = int(_first(limits.get("RLIMIT_NPROC", 256)))
    memory = request.get("memory_bytes") or limits.get("RLIMIT_AS")
    name = f"harness-sandbox/{os.getpid()}-{time.monotonic_ns()}"
    if os.path.exists(os.path.join(CGROUP_V1_PIDS, "cgroup.procs")) or os.path.exists(
            os.path.join(CGROUP_V1_MEMORY, "cgroup.procs")):
        pids = _v1_cgroup(CGROUP_V1_PIDS, "/", name, {"pids.max": nproc})
        memory_path = None
        if memory is not None:  # under this process's own memory cgroup: its limit holds too
            limit = int(_first(memory))
            memory_path = _v1_cgroup(CGROUP_V1_MEMORY, _own_cgroup("memory"), name, {
                "memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit,
                "memory.swappiness": 0}, optional=("memory.memsw.limit_in_bytes",
                                                   "memory.swappiness"))
        return {"pids": pids, "memory": memory_path}
    return _v2_cgroup(name, nproc, None if memory is None else int(_first(memory)))


def _first(value: object) -> object:
    return value[0] if isinstance(value, list | tuple) else value


def _own_cgroup(controller: str) -> str:
    """This process's cgroup (v1) of ``controller``, as /proc/self/cgroup names it."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    return path or "/"
    except OSError:
        pass
    return "/"


def _v1_cgroup(root: str, own: str, name: str, settings: dict[str, int],
               optional: tuple[str, ...] = ()) -> str | None:
    if not os.path.exists(os.path.join(root, "cgroup.procs")):
        return None
    base = os.path.join(root, own.lstrip("/"))
    if not os.path.isdir(base):  # our cgroup is not visible here (another cgroup namespace)
        base = root
    path = os.path.join(base, name)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        for key, value in settings.items():
            try:
                with open(os.path.join(path, key), "w") as f:
                    f.write(str(value))
            except OSError:
                if key not in optional:
                    raise
        return path
    except OSError:
        _remove_cgroup(path)
        return None


def _v2_cgroup(name: str, nproc: int, memory: int | None) -> dict[str, str | None]:
    """One cgroup v2 for the job, with ``pids`` and ``memory`` where they can be enabled
    (from the root down to its parent: a v2 cgroup with processes cannot delegate)."""
    none: dict[str, str | None] = {"pids": None, "memory": None}
    if not os.path.exists(os.path.join(CGROUP_V2, "cgroup.procs")):
        return none
    path = os.path.join(CGROUP_V2, name)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        wanted = ["pids"] + (["memory"] if memory is not None else [])
        enabled = []
        for controller in wanted:
            try:
                for level in (CGROUP_V2, parent):
                    with open(os.path.join(level, "cgroup.subtree_control"), "w") as f:
                        f.write(f"+{controller}")
                enabled.append(controller)
            except OSError:
                continue
        if not enabled:
            return none
        os.mkdir(path)
        out = dict(none)
        if "pids" in enabled:
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(nproc))
            out["pids"] = path
        if "memory" in enabled:
            with open(os.path.join(path, "memory.max"), "w") as f:
                f.write(str(memory))
            try:
                with open(os.path.join(path, "memory.swap.max"), "w") as f:
                    f.write("0")
            except FileNotFoundError:  # no swap accounting: no swap to extend it either
                pass
            out["memory"] = path
        return out
    except OSError:
        _remove_cgroup(path)
        return none


def _remove_cgroup(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # its last processes are still being torn down
            time.sleep(0.02)


# --- the minimal root -------------------------------------------------------------------


def _minimal_root(request: dict) -> tuple[int, int]:
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
    plan = _root_plan(device)
    for op, path, arg in plan:
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
    made = {path for op, path, _ in plan if op == "dir"}
    _ensure_dir(new, workdir, made)
    uid = request.get("uid") or 0
    quota = _quota(request)
    inodes = min(max(quota // 16384, 1024), 65536)
    _mount(b"tmpfs", (new + workdir).encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={quota},nr_inodes={inodes},mode=0700,uid={uid},gid={uid}".encode())
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
def _root_plan(device: str) -> tuple[tuple[str, str, object], ...]:
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


def _quota(request: dict) -> int:
    """The disk quota: the file-size limit (``RLIMIT_FSIZE``) of the request."""
    value = request["limits"].get("RLIMIT_FSIZE", [512 << 20])
    quota = int(_first(value))
    return quota if 0 < quota < 1 << 62 else 512 << 20


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


def _copy_outputs(work_dir: int, host_dir: int, limit: int) -> None:
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


def _kill_children() -> None:
    """SIGKILL and reap every process parented to this subreaper, until none is left."""
    me = str(os.getpid())
    for _ in range(100):
        children = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if fields[1] == me:  # the field after the state is the parent's pid
                    children.append(int(entry))
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in children:
            try:
                os.wait()
            except ChildProcessError:
                break


def _mount(source: bytes, target: bytes, fstype: bytes | None, flags: int,
           data: bytes | None = None) -> None:
    if _LIBC.mount(source, target, fstype, flags, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target.decode(errors='replace')} failed: "
                           f"{os.strerror(err)}")


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(soft, 65536)


if __name__ == "__main__":
    main()
