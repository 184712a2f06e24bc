"""A fork server for sandboxed children: ``python -I -m harness.sandbox_zygote FD SUITES``.

Starting Python and importing torch costs ~1.5 s of CPU per child, about a quarter of
a 5-seed cell group on the digits data. The zygote pays it once: it imports the trainer,
starts no threads, holds no secrets (it is started with the sandbox's scrubbed
environment and no database or broker connection) and then forks one fresh process
per job. Each job gets the same isolation as ``unshare … setpriv … python``:

    zygote ─ fork ─ middle: setsid, unshare(net, mount, pid)
                      └ fork ─ init (PID 1 of the new namespace): mounts its own /proc,
                               reaps everything, reports the job's status
                               └ fork ─ job: stdio to the parent's pipe, every other
                                        descriptor closed, scrubbed environment,
                                        rlimits, capabilities and uid dropped, then
                                        harness.sandbox_child.main (Landlock, guard)

When the job ends, init reports and exits, and the kernel kills whatever the objective
left in the namespace (without namespaces, init is a child subreaper and kills what
is left itself). Requests and replies are JSON messages on a SOCK_SEQPACKET socket
(descriptor FD); the job's output pipe arrives with the request (SCM_RIGHTS).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    2, 4, 8, 32, 4096, 16384, 1 << 18)
CGROUP_V1_PIDS = "/sys/fs/cgroup/pids"
CGROUP_V2 = "/sys/fs/cgroup"
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
_LIBC = ctypes.CDLL(None, use_errno=True)


def main() -> None:
    sys.dont_write_bytecode = True
    import encodings.cp437  # noqa: F401 - zipfile's, for the .npz of inputs
    import zipfile  # noqa: F401

    import numpy  # noqa: F401 - imported once here, shared by every forked job
    import torch  # noqa: F401

    import harness.objectives.validate  # noqa: F401
    import harness.sandbox_child  # noqa: F401
    from harness import registry

    # Every registered suite's pipeline, named by the worker (our environment is scrubbed).
    registry.adopt(json.loads(sys.argv[2]) if len(sys.argv) > 2 else [])
    for module in registry.pipeline_modules():
        importlib.import_module(module)

    control = socket.socket(fileno=int(sys.argv[1]))
    control.sendall(b'{"ready": true}')
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return  # the worker went away: so do we
        request = json.loads(message)
        status_read, status_write = os.pipe()
        cgroup = _pids_cgroup(request["limits"]["RLIMIT_NPROC"][0])
        middle = os.fork()
        if middle == 0:
            control.close()
            os.close(status_read)
            _middle(request, fds[0], status_write, cgroup)
        for fd in fds:
            os.close(fd)
        os.close(status_write)
        control.sendall(json.dumps({"pid": middle, "pids_cgroup": bool(cgroup)}).encode())
        wait_status, usage = _wait(middle, control, request["workdir"])
        if cgroup:
            _remove_cgroup(cgroup)
        with os.fdopen(status_read, "rb") as f:
            reported = f.read(200).decode(errors="replace").strip()
        control.sendall(json.dumps({
            "job": reported or None, "middle": os.waitstatus_to_exitcode(wait_status),
            "cpu": usage.ru_utime + usage.ru_stime}).encode())


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


def _middle(request: dict, output_fd: int, status_fd: int, cgroup: str | None) -> None:
    """Own session and process-count cgroup, new namespaces, then the namespace's init."""
    try:
        os.setsid()
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cgroup:  # every process and thread of the job counts against pids.max
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        namespaces = request["namespaces"]
        if namespaces and _LIBC.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) != 0:
            os.write(status_fd, b"setup:unshare failed\n")
            os._exit(70)
        init = os.fork()
        if init == 0:
            _init(request, output_fd, status_fd, namespaces)
        os.close(output_fd)
        os.close(status_fd)
        _, status = os.waitpid(init, 0)
        os._exit(0 if os.waitstatus_to_exitcode(status) == 0 else 70)
    except BaseException:  # noqa: BLE001 - never return into the zygote's loop
        os._exit(70)


def _init(request: dict, output_fd: int, status_fd: int, namespaces: bool) -> None:
    """PID 1 of the sandbox: its own /proc, reaps every process, reports the job's end."""
    try:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if namespaces:
            _mount(b"none", b"/", None, MS_REC | MS_PRIVATE)
            _mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            # Nothing the objective writes can be mapped executable (a .so it imports).
            workdir = request["workdir"].encode()
            _mount(workdir, workdir, None, MS_BIND)
            _mount(workdir, workdir, None, MS_BIND | MS_REMOUNT | MS_NOEXEC | MS_NOSUID
                   | MS_NODEV)
        else:  # orphans come back to this process instead of the machine's init
            _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        job = os.fork()
        if job == 0:
            os.close(status_fd)
            _job(request, output_fd)
        os.close(output_fd)
        while True:  # reap orphans until the job itself ends
            pid, status = os.wait()
            if pid == job:
                break
        if os.WIFSIGNALED(status):
            line = f"signal:{os.WTERMSIG(status)}"
        else:
            line = f"exit:{os.waitstatus_to_exitcode(status)}"
        os.write(status_fd, line.encode() + b"\n")
        if not namespaces:
            _kill_children()
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(status_fd, f"setup:{type(exc).__name__}: {exc}"[:190].encode() + b"\n")
        finally:
            os._exit(70)


def _job(request: dict, output_fd: int) -> None:
    """The untrusted side: nothing inherited but its inputs, no privileges, limits set."""
    try:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.closerange(3, _max_fd())
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
        sys.argv = ["harness.sandbox_child", request["workdir"]]
        from pathlib import Path

        from harness.sandbox_child import main as child_main

        child_main(Path(request["workdir"]))
    except BaseException:  # noqa: BLE001 - an unreported end is a crash, never the zygote's
        import traceback

        traceback.print_exc()
    finally:
        os._exit(70)


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


def _pids_cgroup(limit: int) -> str | None:
    """A fresh cgroup capping the job's processes and threads at ``limit``, where the
    machine lets this process create one (cgroup v1 ``pids``, or v2 with ``pids``)."""
    name = f"harness-sandbox/{os.getpid()}-{time.monotonic_ns()}"
    for root, enable in ((CGROUP_V1_PIDS, False), (CGROUP_V2, True)):
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        path = os.path.join(root, name)
        try:
            parent = os.path.dirname(path)
            os.makedirs(parent, exist_ok=True)
            if enable:  # v2: the controller must be enabled from the root down to the parent
                for level in (root, parent):
                    with open(os.path.join(level, "cgroup.subtree_control"), "w") as f:
                        f.write("+pids")
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(limit))
            return path
        except OSError:
            _remove_cgroup(path)
    return None


def _remove_cgroup(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # its last processes are still being torn down
            time.sleep(0.02)


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


def _mount(source: bytes, target: bytes, fstype: bytes | None, flags: int) -> None:
    if _LIBC.mount(source, target, fstype, flags, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target.decode()} failed")


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(soft, 65536)


if __name__ == "__main__":
    main()
