"""Starting a sandboxed child: through the fork server (default) or a fresh exec.

``HARNESS_SANDBOX_MODE=fork`` (default) forks each child from a per-thread zygote
(:mod:`harness.sandbox.zygote`) that has the trainer imported already; ``exec``
starts ``unshare … setpriv … python -I -m harness.sandbox.child`` per child. Both give
the child new network, PID, IPC and mount namespaces, rlimits, no capabilities, and
Landlock, seccomp and the guard; only ``fork`` adds the pids and memory cgroups, the
tmpfs work directory of the disk quota and the minimal root (a launch's attributes named
by the layers, :func:`harness.sandbox.layers.launched`, say which it got), and saves
~1.5 s of CPU per child. What the machine grants is every layer's probe
(:func:`isolation_support`).
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.contract import registry
from harness.sandbox import layers


class SandboxUnavailable(RuntimeError):
    """The machine cannot provide the isolation this worker is configured to require."""


@dataclass(frozen=True)
class Launch:
    workdir: Path
    rlimits: dict[str, tuple[int, int]]
    uid: int | None
    namespaces: bool
    threads: int
    device: str
    # The child's ends of (requests, replies, report) pipes: its descriptors 0, 3 and 4.
    # The caller keeps ownership (closes its copies once ``launch`` returned).
    channel: tuple[int, int, int] | None = None
    # The limit of the job's memory cgroup (fork mode); None: the RLIMIT_AS value.
    memory_bytes: int | None = None
    # The processes of one job (a run's loss servers) share a parent memory cgroup, named
    # ``job`` and limited to ``job_memory_bytes``: their sum is bounded, not only each one.
    job: str | None = None
    job_memory_bytes: int | None = None


class Running(Protocol):
    pid: int
    output: Any  # a binary stream of the child's stdout and stderr
    # And one bool per name in layers.launched(): the kernel layers this launch got (all
    # False in exec mode): pids_cgroup, memory_cgroup, tmpfs_workdir, minimal_root.

    def poll(self) -> tuple[int, float] | None:
        """(exit code, negative for a signal; CPU seconds) once it ended, else None."""

    def kill(self) -> None: ...

    def close(self) -> None:
        """Release what launched it (after ``poll`` returned, or after ``kill``)."""


def launch(spec: Launch) -> Running:
    if os.environ.get("HARNESS_SANDBOX_MODE", "fork") == "exec":
        return _Exec(spec)
    zygote = _acquire(spec.threads, spec.device)
    try:
        return zygote.start(spec)
    except BaseException:
        zygote.close()
        raise


def environment(workdir: Path | None, threads: int, device: str) -> dict[str, str]:
    """The child's whole environment: nothing of the worker's (no credentials)."""
    home = str(workdir) if workdir else "/tmp"
    env = {"PATH": "/usr/bin:/bin", "HOME": home,
           "TMPDIR": str(workdir / "tmp") if workdir else "/tmp", "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "HARNESS_SANDBOXED": "1"}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    if device.startswith("cuda"):
        env.update({k: v for k, v in os.environ.items()
                    if k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")})
    return env


# --- exec: a fresh interpreter per child ------------------------------------------------


class _Exec:
    def __init__(self, spec: Launch) -> None:
        command = [sys.executable, "-I", "-m", "harness.sandbox.child", str(spec.workdir)]
        if os.geteuid() == 0:
            ids = (["--reuid", str(spec.uid), "--regid", str(spec.uid), "--clear-groups"]
                   if spec.uid else [])
            command = ["setpriv", *ids, "--no-new-privs", "--inh-caps=-all",
                       "--bounding-set=-all", "--", *command]
        if spec.namespaces:
            command = ["unshare", "--net", "--pid", "--ipc", "--fork", "--kill-child",
                       "--mount-proc", *command]
        rlimits, channel = spec.rlimits, spec.channel

        def apply_rlimits() -> None:  # in the forked child, before exec
            for name, value in rlimits.items():
                resource.setrlimit(getattr(resource, name), value)
            with open("/proc/self/oom_score_adj", "w") as f:  # the first the kernel kills
                f.write("1000")
            if channel:  # replies on 3, the guard's report on 4 (kept: pass_fds)
                high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in channel[1:]]
                os.dup2(high[0], 3)
                os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            command, cwd=spec.workdir, env=environment(spec.workdir, spec.threads, spec.device),
            stdin=channel[0] if channel else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, preexec_fn=apply_rlimits, start_new_session=True,
            pass_fds=(3, 4) if channel else ())
        self.pid = self.proc.pid
        self.output = self.proc.stdout
        for name in layers.launched():
            setattr(self, name, False)

    def poll(self) -> tuple[int, float] | None:
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if not pid:
            return None
        self.proc.returncode = code = os.waitstatus_to_exitcode(status)
        return code, usage.ru_utime + usage.ru_stime

    def kill(self) -> None:
        kill_group(self.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
            self.proc.wait()


# --- fork: one zygote per worker thread ---------------------------------------------------


class _Zygote:
    def __init__(self, threads: int, device: str, roots: str,
                 template: _Zygote | None = None) -> None:
        """A fork server importing the suite packages ``roots`` (``registry.import_roots``
        as JSON): a fresh interpreter, or a copy of ``template`` (milliseconds)."""
        self.threads, self.device, self.roots = threads, device, roots
        self.key = (threads, device, roots)  # a fork server is reused for the same key only
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.socket = ours
        self.proc: subprocess.Popen | None = None
        self.pid = 0
        if template is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "harness.sandbox.zygote", str(theirs.fileno()),
                 self.roots],
                env=environment(None, threads, device), stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
            self.pid = self.proc.pid
        else:
            try:
                socket.send_fds(template.socket, [b'{"clone": true}'], [theirs.fileno()])
                cloned = template._receive(timeout=30)
            except OSError:
                cloned = None
            if not cloned or not cloned.get("cloned"):
                theirs.close()
                ours.close()
                raise SandboxUnavailable("the sandbox fork server could not be copied")
        theirs.close()
        atexit.register(self.close)
        reply = self._receive(timeout=120)
        if not reply or not reply.get("ready"):
            self.close()
            why = f": {reply['error']}" if reply and reply.get("error") else ""
            raise SandboxUnavailable(f"the sandbox fork server did not start{why}")
        self.pid = self.pid or int(reply.get("pid", 0))

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return self.socket.fileno() >= 0

    def start(self, spec: Launch) -> _Forked:
        read, write = os.pipe()
        request = {"workdir": str(spec.workdir), "uid": spec.uid,
                   "namespaces": spec.namespaces, "device": spec.device,
                   "env": environment(spec.workdir, spec.threads, spec.device),
                   "limits": {k: list(v) for k, v in spec.rlimits.items()},
                   "memory_bytes": spec.memory_bytes, "job": spec.job,
                   "job_memory_bytes": spec.job_memory_bytes}
        try:
            socket.send_fds(self.socket, [json.dumps(request).encode()],
                            [write, *(spec.channel or ())])
        finally:
            os.close(write)
        reply = self._receive(timeout=60)
        if not reply or "pid" not in reply:
            os.close(read)
            self.close()
            raise SandboxUnavailable("the sandbox fork server did not start the child")
        forked = _Forked(self, reply["pid"], os.fdopen(read, "rb", buffering=0))
        for name in layers.launched():
            setattr(forked, name, bool(reply.get(name)))
        return forked

    def _receive(self, timeout: float | None) -> dict | None:
        ready, _, _ = select.select([self.socket], [], [], timeout)
        if not ready:
            return None
        data = self.socket.recv(1 << 16)
        return json.loads(data) if data else None

    def close(self) -> None:
        self.socket.close()  # a copy ends when its socket closes
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
        elif self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        atexit.unregister(self.close)


class _Forked:
    def __init__(self, zygote: _Zygote, pid: int, output: Any) -> None:
        self.zygote, self.pid, self.output = zygote, pid, output
        for name in layers.launched():
            setattr(self, name, False)
        self.ended = False  # the fork server's last reply for this job was read

    def poll(self) -> tuple[int, float] | None:
        try:
            reply = self.zygote._receive(timeout=0)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            if self.zygote.alive():
                return None
            raise SandboxUnavailable("the sandbox fork server died during a job")
        job = reply.get("job") or ""
        if job.startswith("setup:"):
            raise SandboxUnavailable(f"sandbox setup failed: {job[6:]}")
        kind, _, value = job.partition(":")
        code = int(value) if kind == "exit" else -int(value) if kind == "signal" \
            else -signal.SIGKILL  # init was killed before reporting: by us or the kernel
        self.ended = True
        return code, float(reply.get("cpu", 0.0))

    def kill(self) -> None:
        kill_group(self.pid)
        try:  # before its setsid the group does not exist yet; its death takes init along
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Back to the pool; a fork server with a reply still due is not reused."""
        if self.ended:
            _release(self.zygote)
        else:
            self.kill()
            self.zygote.close()


# Idle fork servers by (threads, device): a job takes one (or starts one) and gives it
# back, so a web process's request threads share a few instead of one per thread.
_IDLE: dict[tuple[int, str, str], list[_Zygote]] = {}
_LOCK = threading.Lock()
MAX_IDLE = 64  # copies are cheap (shared pages): one per member of a big group
# Per (threads, device, suite packages): a fork server that runs no job and only makes
# copies. A suite registered later (a plugin, a test's) gets a fork server that imports it.
_TEMPLATES: dict[tuple[int, str, str], _Zygote] = {}


def _acquire(threads: int, device: str) -> _Zygote:
    roots = json.dumps(registry.import_roots())
    key = (threads, device, roots)
    with _LOCK:
        idle = _IDLE.setdefault(key, [])
        while idle:
            zygote = idle.pop()
            if zygote.alive():
                return zygote
            zygote.close()
        template = _TEMPLATES.get(key)
        if template is not None and not template.alive():
            template.close()
            template = None
        if template is None:  # one fresh interpreter per key; copies after it
            template = _TEMPLATES[key] = _Zygote(threads, device, roots)
        return _Zygote(threads, device, roots, template)


def _release(zygote: _Zygote) -> None:
    with _LOCK:
        idle = _IDLE.setdefault(zygote.key, [])
        if zygote.alive() and len(idle) < MAX_IDLE:
            idle.append(zygote)
            return
    zygote.close()


def shutdown() -> None:
    """Stop every idle fork server of this process (workers call it on exit)."""
    with _LOCK:
        zygotes = [z for idle in _IDLE.values() for z in idle] + list(_TEMPLATES.values())
        _IDLE.clear()
        _TEMPLATES.clear()
    for zygote in zygotes:
        zygote.close()


# --- what the machine allows ---------------------------------------------------------------


@functools.cache
def isolation_support() -> dict[str, Any]:
    """Which kernel layers this machine grants: every layer's probe
    (:func:`harness.sandbox.layers.probe`), once per process."""
    return layers.probe()


def sandbox_uid(support: dict[str, Any]) -> int | None:
    """A uid of its own per worker thread, so the process limit counts only this sandbox."""
    if not support["uid_drop"]:
        return None
    return 200_000 + (os.getpid() * 7 + threading.get_ident()) % 100_000


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a helper that becomes the uid and signals -1)."""
    helper = os.fork()
    if helper == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(3):
                try:
                    os.kill(-1, signal.SIGKILL)
                except OSError:
                    break
        finally:
            os._exit(0)
    os.waitpid(helper, 0)
