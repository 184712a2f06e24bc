"""A fork server for sandboxed children: ``python -I -m harness.sandbox.zygote FD SUITES``.

Starting Python and importing torch costs ~1.5 s of CPU per child, about a quarter of
a 5-seed cell group on the digits data. The zygote pays it once: it imports the trainer,
starts no threads, holds no secrets (it is started with the sandbox's scrubbed
environment and no database or broker connection) and then forks one fresh process
per job. Each job gets the same isolation as ``unshare … setpriv … python``, and more:

    zygote ─ fork ─ middle: setsid, joins the job's pids and memory cgroups,
                    │       unshare(net, mount, pid, ipc)
                      └ fork ─ init (PID 1 of the new namespace): builds the job's minimal
                               root (minimal_root.py), reaps everything, copies the job's outputs
                               out, reports the job's status
                               └ fork ─ job: stdio to the parent's pipe (or the parent's
                                        channel at 0, 3, 4), every other descriptor
                                        closed, scrubbed environment, rlimits,
                                        capabilities and uid dropped, then
                                        harness.sandbox.child.main (Landlock, seccomp, guard:
                                        harness.sandbox.layers)

The job's cgroups are :mod:`harness.sandbox.cgroups`; with namespaces, init builds the
job's minimal root and its tmpfs work directory of the disk quota
(:mod:`harness.sandbox.minimal_root`), copies what the parent wrote into the work
directory in and the job's outputs back out when it ends.

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
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys

from harness.sandbox import cgroups, minimal_root, shared_pages

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = (0x00020000, 0x20000000, 0x40000000,
                                                         0x08000000)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
_LIBC = ctypes.CDLL(None, use_errno=True)


def main() -> None:
    sys.dont_write_bytecode = True
    import encodings.cp437  # noqa: F401 - zipfile's, for the .npz of inputs
    import zipfile  # noqa: F401

    import numpy  # noqa: F401 - imported once here, shared by every forked job
    import torch

    torch.backends.cpu.get_cpu_capability()  # cpuinfo parsed here: a job's /proc has none
    import harness.objectives.validate  # noqa: F401
    import harness.sandbox.child  # noqa: F401
    import harness.sandbox.layers  # noqa: F401 - the child's lock-down
    import harness.sandbox.traced

    harness.sandbox.traced.warm()  # torch.export imports lazily: once here for every child
    # Every registered suite's pipeline, named by the worker (our environment is scrubbed).
    from harness.contract import registry
    registry.adopt(json.loads(sys.argv[2]) if len(sys.argv) > 2 else [])
    for module in registry.pipeline_modules():
        importlib.import_module(module)
    minimal_root.plan("cpu")  # worked out once, here; every job's init only mounts

    control = socket.socket(fileno=int(sys.argv[1]))
    shared = shared_pages.writable_shared()
    if shared:  # every job forked from here would share these pages with every other
        control.sendall(json.dumps({"ready": False, "error": (
            f"the fork server holds writable shared memory, which every job would "
            f"inherit: {'; '.join(shared)}")}).encode())
        return
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
            minimal_root.plan(request.get("device", "cpu"))  # once per device, in this process
        groups = cgroups.create(request)
        middle = os.fork()
        if middle == 0:
            control.close()
            os.close(status_read)
            _middle(request, fds, status_write, groups)
        for fd in fds:
            os.close(fd)
        os.close(status_write)
        namespaces = bool(request["namespaces"])
        control.sendall(json.dumps({
            "pid": middle, "pids_cgroup": bool(groups["pids"]),
            "memory_cgroup": bool(groups["memory"]),
            # with namespaces, init builds both or the job never starts (a setup error)
            "tmpfs_workdir": namespaces, "minimal_root": namespaces}).encode())
        wait_status, usage = _wait(middle, control, request["workdir"])
        for path in dict.fromkeys(p for p in groups.values() if p):
            cgroups.remove(path)
            cgroups.remove_job(path)
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
    try:  # readable when the job ends: its end is seen at once, not at the next tick
        ended = [os.pidfd_open(middle)]
    except (AttributeError, OSError):  # no pidfd (before Linux 5.3): a tick of 0.2 s
        ended = []
    while True:
        pid, status, usage = os.wait4(middle, os.WNOHANG)
        if pid:
            for fd in ended:
                os.close(fd)
            return status, usage
        readable, _, _ = select.select([control, *ended], [], [], 0.2)
        if control in readable and not control.recv(1 << 16):
            for kill in (lambda: os.killpg(middle, signal.SIGKILL),
                         lambda: os.kill(middle, signal.SIGKILL)):
                try:
                    kill()
                except OSError:
                    pass
            os.waitpid(middle, 0)
            shutil.rmtree(workdir, ignore_errors=True)  # its owner cannot any more
            os._exit(0)


def _middle(request: dict, fds: list[int], status_fd: int, groups: dict) -> None:
    """Own session, the job's cgroups, new namespaces, then the namespace's init."""
    try:
        os.setsid()
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        with open("/proc/self/oom_score_adj", "w") as f:  # the first the kernel kills
            f.write("1000")
        for path in dict.fromkeys(p for p in groups.values() if p):
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
            host_dir, work_dir = minimal_root.build(request)
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
            minimal_root.copy_outputs(work_dir, host_dir, minimal_root.quota(request))
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


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(soft, 65536)


if __name__ == "__main__":
    main()
