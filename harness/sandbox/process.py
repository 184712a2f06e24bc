"""One sandboxed process, seen from the trusted side: started, watched, ended, explained.

It gets a private work directory holding ``job.json`` and the objective's file, is
launched through :mod:`harness.sandbox.launch` (namespaces, rlimits, cgroups, dropped
privileges; Landlock, seccomp and the guard once it has imported what it needs: the
layers of :mod:`harness.sandbox.layers`, which this side checks, asks for and records) and is
handed three pipes: requests in (its descriptor 0), replies out (3) and the guard's
report of a refusal (4). Its stdout and stderr are captured (the head kept, the rest
counted: printing past 256× the cap kills it) and shown only to the objective's owner,
with control characters escaped; nothing in them is believed. A violation is what the
report pipe says, or the guard's exit status.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract import registry
from harness.contract.suite import Suite
from harness.sandbox import launch as launcher
from harness.sandbox import layers
from harness.sandbox.child import READY, SETUP_FAILED
from harness.sandbox.guard import MARKER, VIOLATION_EXIT
from harness.sandbox.launch import SandboxUnavailable, isolation_support

# A status for each reason a child can end without a result.
STATUS_OF_REASON = {"wall": "timeout", "memory": "killed", "cpu": "killed", "disk": "killed",
                    "output": "killed", "violation": "killed", "objective": "failed",
                    "invalid-output": "failed", "crash": "failed"}
REPORT_BYTES = 1 << 16


@dataclass(frozen=True)
class Limits:
    wall_seconds: float
    cpu_seconds: int
    memory_bytes: int
    disk_bytes: int
    output_bytes: int  # kept (head) of stdout+stderr; 256× this kills the child
    open_files: int = 256
    processes: int = 256  # threads and processes of one sandboxed process (pids cgroup)
    # the memory cgroup's limit, of each process and of a job's processes together (None:
    # memory_bytes, each)
    job_memory_bytes: int | None = None

    @classmethod
    def for_run(cls, suite: Suite, members: int, threads: int) -> Limits:
        r = suite.resources
        wall = r.wall_seconds(members)
        return cls(wall_seconds=wall, cpu_seconds=int(wall * max(threads, 1)) + 30,
                   memory_bytes=r.memory_mb << 20, disk_bytes=r.disk_mb << 20,
                   output_bytes=r.output_kb << 10, job_memory_bytes=r.job_memory_mb << 20)


class Process:
    """A sandboxed ``harness.sandbox.child`` running ``fields["task"]`` on ``code``."""

    def __init__(self, fields: dict[str, Any], code: str, filename: str, limits: Limits, *,
                 threads: int = 1, device: str = "cpu", python_guard: bool = True,
                 job: str | None = None) -> None:
        """``job`` names the processes whose memory is bounded together
        (``limits.job_memory_bytes``): one run's loss servers."""
        support = isolation_support()
        if os.environ.get("HARNESS_SANDBOX_STRICT", "") == "1":
            problem = layers.strict_problem(support, os.environ.get("HARNESS_SANDBOX_MODE"))
            if problem:
                raise SandboxUnavailable(problem)
        self.limits, self.python_guard, self.support = limits, python_guard, support
        base = os.environ.get("HARNESS_SANDBOX_DIR") or None
        self.workdir = Path(tempfile.mkdtemp(prefix="harness-sandbox-", dir=base))
        self.uid = launcher.sandbox_uid(support)
        self.started = time.monotonic()
        self.ended: tuple[int, float] | None = None
        self.reason = ""  # a limit this side enforced (wall, output, disk)
        pipes = [os.pipe() for _ in range(3)]
        self.requests, self.replies, report = pipes[0][1], pipes[1][0], pipes[2][0]
        child_ends = (pipes[0][0], pipes[1][1], pipes[2][1])
        self.running: launcher.Running | None = None
        try:
            (self.workdir / "tmp").mkdir()
            (self.workdir / filename).write_text(code, encoding="utf-8")
            (self.workdir / "job.json").write_text(json.dumps({
                **fields, "objective_file": filename, "threads": threads, "device": device,
                "suite_packages": registry.import_roots(),
                **layers.job_flags(layers.Setup(support, python_guard=python_guard))}))
            if self.uid is not None:
                _chown_tree(self.workdir, self.uid)
            spec = launcher.Launch(self.workdir, _rlimits(limits), self.uid,
                                   support["namespaces"], threads, device, channel=child_ends,
                                   memory_bytes=limits.job_memory_bytes,
                                   job=job if limits.job_memory_bytes else None,
                                   job_memory_bytes=limits.job_memory_bytes)
            self.running = launcher.launch(spec)
        except BaseException:
            for fd in (*child_ends, self.requests, self.replies, report):
                os.close(fd)
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        for fd in child_ends:
            os.close(fd)
        self.capture = _Capture(self.running.output, limits.output_bytes,
                                kill_after=256 * limits.output_bytes)
        self.report = _Report(report)
        self._last_disk = self.started

    # --- while it runs ------------------------------------------------------------------

    def watch(self) -> str:
        """The limit this side enforces that it broke (then it is killed), or ""."""
        if self.reason:
            return self.reason
        now = time.monotonic()
        if now - self.started > self.limits.wall_seconds:
            self.reason = "wall"
        elif self.capture.overflowed:
            self.reason = "output"
        elif not self.tmpfs and now - self._last_disk > 0.5:  # a tmpfs is the kernel's quota
            self._last_disk = now
            if _disk_usage(self.workdir) > self.limits.disk_bytes:
                self.reason = "disk"
        if self.reason:
            self.kill()
        return self.reason

    def poll(self) -> tuple[int, float] | None:
        if self.ended is None and self.running is not None:
            self.ended = self.running.poll()
        return self.ended

    def kill(self) -> None:
        if self.running is not None and self.ended is None:
            self.running.kill()

    def wait(self, timeout: float = 10.0) -> tuple[int, float]:
        """Its exit (killed first if it does not end within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                deadline = time.monotonic() + 10
            time.sleep(0.01)
        return self.ended

    def end_requests(self) -> None:
        """Close the request pipe (the server reads end of file and exits)."""
        if self.requests >= 0:
            os.close(self.requests)
            self.requests = -1

    @property
    def tmpfs(self) -> bool:
        return bool(getattr(self.running, "tmpfs_workdir", False))

    # --- after it ended -----------------------------------------------------------------

    def violations(self) -> list[str]:
        return self.report.violations()

    def explain(self) -> tuple[str, str]:
        """(reason, error) of an end without a result; ("", "") when it exited cleanly."""
        code, cpu = self.wait()
        if self.reason:
            return self.reason, _limit_message(self.reason, self.limits, self.capture.total)
        if code == SETUP_FAILED and not self.capture.ready:
            raise SandboxUnavailable(f"the sandbox could not be set up: "
                                     f"{self.capture.text()[-500:]}")
        violations = self.violations()
        if code == VIOLATION_EXIT or (code != 0 and violations):
            return "violation", "\n".join(violations) or (
                "the objective attempted a forbidden action (its report of it was hidden)")
        if code == 0:
            return "", ""
        return _exit_reason(code, cpu, self.limits)

    def isolation(self) -> dict[str, Any]:
        """What this side asked for; the child fails closed when it cannot apply a layer,
        and nothing the child says about itself is recorded."""
        return isolation_record(layers.Setup(self.support, self.uid, self.python_guard,
                                             self.running))

    def scrub(self, text: str) -> str:
        """Messages name the user's file, never the server's work directory."""
        return text.replace(str(self.workdir) + "/", "")

    def close(self) -> None:
        self.kill()
        if self.running is not None:
            if self.ended is None:
                self.wait(timeout=5)
            self.running.close()
        self.capture.join()
        self.report.join()
        self.end_requests()
        if self.replies >= 0:
            os.close(self.replies)
            self.replies = -1
        if self.uid is not None and not self.support["namespaces"]:
            launcher.kill_uid(self.uid)  # no PID namespace took its processes with it
        shutil.rmtree(self.workdir, ignore_errors=True)


def isolation_record(setup: layers.Setup) -> dict[str, Any]:
    """A cell's ``environment.sandbox`` of one process: the launch mode, then every
    layer's record (:func:`harness.sandbox.layers.recorded`)."""
    return {"mode": os.environ.get("HARNESS_SANDBOX_MODE", "fork"),
            **layers.recorded(setup)}


def _rlimits(limits: Limits) -> dict[str, tuple[int, int]]:
    cpu = max(int(limits.cpu_seconds), 1)
    return {"RLIMIT_AS": (limits.memory_bytes,) * 2, "RLIMIT_CPU": (cpu, cpu + 5),
            "RLIMIT_NOFILE": (limits.open_files,) * 2, "RLIMIT_NPROC": (limits.processes,) * 2,
            "RLIMIT_FSIZE": (limits.disk_bytes,) * 2, "RLIMIT_CORE": (0, 0)}


def _exit_reason(code: int, cpu: float, limits: Limits) -> tuple[str, str]:
    if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or (
            code in (-signal.SIGKILL, 128 + signal.SIGKILL) and cpu >= limits.cpu_seconds):
        return "cpu", _limit_message("cpu", limits, 0)
    if code in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return "memory", ("the sandboxed process was killed by the kernel (SIGKILL), most "
                          "likely out of memory")
    if code in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
        return "disk", _limit_message("disk", limits, 0)
    if code < 0 or code > 128:
        number = -code if code < 0 else code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return "crash", f"the sandboxed process died of {name} without a result"
    return "crash", f"the sandboxed process exited with status {code} without a result"


def _limit_message(reason: str, limits: Limits, printed: int) -> str:
    return {
        "wall": f"ran past the wall-clock limit of {limits.wall_seconds:.0f} s and was killed",
        "cpu": f"used more than its {limits.cpu_seconds} s of CPU time and was killed",
        "disk": f"wrote more than its {limits.disk_bytes >> 20} MiB disk quota and was killed",
        "output": f"printed {printed:,} bytes, more than the {256 * limits.output_bytes:,} "
                  f"byte output limit, and was killed",
    }[reason]


# --- output capture ---------------------------------------------------------------------


class _Capture:
    """Reads the child's output on a thread; keeps the head, counts the rest."""

    def __init__(self, stream: Any, keep: int, kill_after: int) -> None:
        self.keep, self.kill_after = keep, kill_after
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.ready = False  # the child said it is locked down (before its objective loads)
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    @property
    def overflowed(self) -> bool:
        return self.total > self.kill_after

    def _read(self, stream: Any) -> None:
        with stream:
            while chunk := os.read(stream.fileno(), 65536):
                if not self.ready and self.total < 4096:
                    self.ready = (READY + "\n").encode() in bytes(self.head) + chunk
                self.total += len(chunk)
                room = self.keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                self.tail = (self.tail + chunk)[-4096:]

    def join(self) -> None:
        self.thread.join(timeout=5)

    def text(self) -> str:
        text = self.head.decode("utf-8", "replace").replace(READY + "\n", "", 1)
        if self.total > len(self.head):
            skipped = self.total - len(self.head) - min(len(self.tail),
                                                        self.total - len(self.head))
            tail = self.tail[-min(len(self.tail), self.total - len(self.head)):]
            text += (f"\n[… {skipped:,} bytes of output omitted …]\n"
                     + bytes(tail).decode("utf-8", "replace"))
        return text


class _Report:
    """The guard's report pipe, read on a thread (at most ``REPORT_BYTES``)."""

    def __init__(self, fd: int) -> None:
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 4096):
                if len(self.data) < REPORT_BYTES:
                    self.data += chunk[:REPORT_BYTES - len(self.data)]
        finally:
            os.close(fd)

    def join(self) -> None:
        self.thread.join(timeout=5)

    def violations(self) -> list[str]:
        self.join()
        lines = bytes(self.data).decode("utf-8", "replace").split("\n")
        return [line[len(MARKER):][:500] for line in lines if line.startswith(MARKER)][:20]


# --- helpers ----------------------------------------------------------------------------------


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, _, files in os.walk(root):
        os.chown(dirpath, uid, uid)
        for name in files:
            os.chown(os.path.join(dirpath, name), uid, uid)


def _disk_usage(root: Path, max_entries: int = 20_000) -> int:
    """Where the work directory is not a tmpfs of its own (exec mode): a walk, which
    cannot see files unlinked while open; the tmpfs is the real quota."""
    total, seen = 0, 0
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            return 1 << 62  # a tree it cannot walk (too deep a path) is a disk attack
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return 1 << 62  # a directory this full is a disk attack in itself
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    return total
