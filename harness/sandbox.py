"""Run a submitted objective's training in an isolated child; judge it here.

Train inside, judge outside (docs/architecture.md). The trusted parent prepares the
suite's job (the trainer's inputs only: noisy training labels and unlabeled test
inputs), writes them as raw numpy arrays into a private work directory and starts

    new network, PID and mount namespaces (its own /proc)
      no capabilities (an unprivileged uid where the interpreter allows it)
        harness.sandbox_child: Landlock, then an audit-hook guard, then the objective

(forked from a fork server that has the trainer imported, or exec'd fresh:
:mod:`harness.sandbox_launch`)
under rlimits (address space, CPU time, open files, processes, file size, no core
dumps) with a scrubbed environment. The parent enforces the wall-clock limit, the
disk quota of the work directory and the output cap, captures stdout/stderr
(truncated), maps the child's ``outputs.npz`` without unpickling, keeps of its
``result.json`` only typed fields (the generic ones and those the suite declares in
``Suite.train_info``), lets the suite's judge validate shapes, dtypes and ranges, and
computes every metric itself.
When the child's PID namespace ends, the kernel kills everything the objective
started, so nothing outlives a cell.

Layers the kernel refuses (no namespaces inside an unprivileged container, no
Landlock) are skipped and recorded in each cell's environment; with
``HARNESS_SANDBOX_STRICT=1`` a missing layer is an infrastructure error instead.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import struct
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import sandbox_launch as launcher
from harness import seccomp
from harness.sandbox_child import READY, SETUP_FAILED
from harness.sandbox_guard import MARKER, VIOLATION_EXIT
from harness.sandbox_launch import SandboxUnavailable, isolation_support

__all__ = ["ChildOutcome", "Limits", "SandboxUnavailable", "isolation_support",
           "judge_outcome", "run_cells_sandboxed", "run_child"]
from harness import registry
from harness.objectives.loading import Objective
from harness.objectives.validate import Validation
from harness.pipeline import InvalidOutput, Job, Pipeline, TrainOutput, failed
from harness.suite import INFO_TYPES, CellResult, Suite

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
POLL_SECONDS = 0.02  # how soon a finished child is noticed
MAX_REPORT_BYTES = 1 << 20
# A status for each reason a child can end without a result.
STATUS_OF_REASON = {"wall": "timeout", "memory": "killed", "cpu": "killed", "disk": "killed",
                    "output": "killed", "violation": "killed", "objective": "failed",
                    "invalid-output": "failed", "crash": "failed"}


@dataclass(frozen=True)
class Limits:
    wall_seconds: float
    cpu_seconds: int
    memory_bytes: int
    disk_bytes: int
    output_bytes: int  # kept (head) of stdout+stderr; 256× this kills the child
    open_files: int = 256
    processes: int = 256  # per sandbox uid (threads count), where the uid is dropped

    @classmethod
    def for_run(cls, suite: Suite, members: int, threads: int) -> Limits:
        r = suite.resources
        wall = r.wall_seconds(members)
        return cls(wall_seconds=wall, cpu_seconds=int(wall * max(threads, 1)) + 30,
                   memory_bytes=r.memory_mb << 20, disk_bytes=r.disk_mb << 20,
                   output_bytes=r.output_kb << 10)


# Checking code at submission: the validator's smoke batches take well under a second.
VALIDATION_LIMITS = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=16 << 30,
                           disk_bytes=64 << 20, output_bytes=64 << 10)


@dataclass
class ChildOutcome:
    """What one sandboxed run produced, before judging."""

    reason: str = ""  # "" when the child reported normally
    error: str = ""
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)  # the child's result.json, typed
    captured: str = ""  # its stdout and stderr, truncated
    wall_time: float = 0.0
    isolation: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)  # streamed by the guard
    pids_cgroup: bool = False


# --- the entry point ------------------------------------------------------------------


def run_cells_sandboxed(suite: Suite, code: str, filename: str,
                        hyperparameters: Mapping[str, Any], variants: list[str],
                        seeds: list[int], *, threads: int = 1, device: str = "cpu",
                        heartbeat: Callable[[], None] | None = None,
                        limits: Limits | None = None, python_guard: bool = True,
                        data_root: str | None = None,
                        verify_epochs: bool | None = None) -> list[CellResult]:
    """Every (variant, seed) cell of an untrusted objective: trained in the sandbox, judged here.

    Never raises for anything the objective does; raises for infrastructure problems
    (the caller retries those). ``verify_epochs`` (default: ``HARNESS_VERIFY_EPOCHS=1``)
    has suites that can return every epoch's weights, so that the judge recomputes the
    whole accuracy curve and the best-epoch metric, not only the final epoch; it costs
    ~10% of a 5-seed digits group (bench/dispatch.py), hence off by default.
    """
    if verify_epochs is None:
        verify_epochs = os.environ.get("HARNESS_VERIFY_EPOCHS", "") == "1"
    steps = registry.pipeline(suite)
    results: list[CellResult] = []
    jobs = steps.prepare(suite, [suite.variant(v) for v in variants], seeds,
                         data_root=data_root, download=False)
    for job in jobs:
        run_limits = limits or Limits.for_run(suite, len(job.members), threads)
        if verify_epochs:  # every epoch's weights, within half the disk quota
            job.plan["epoch_weights_budget"] = run_limits.disk_bytes // 2
        outcome = run_child(suite, job, code, filename, hyperparameters, run_limits,
                            threads=threads, device=device, heartbeat=heartbeat,
                            python_guard=python_guard)
        results += judge_outcome(steps, suite, job, outcome)
    return results


def judge_outcome(steps: Pipeline, suite: Suite, job: Job,
                  outcome: ChildOutcome) -> list[CellResult]:
    """Cell results from a child's outcome: the suite's judge, or the typed failure."""
    result = outcome.result
    violations = list(dict.fromkeys(outcome.violations + result.get("violations", [])))[:20]
    reason, error = outcome.reason, outcome.error
    if not reason and violations:
        reason, error = "violation", "\n".join(violations)
    if not reason and result.get("error"):
        reason = str(result.get("reason") or "objective")
        reason = reason if reason in STATUS_OF_REASON else "objective"
        error = str(result["error"])
    results: list[CellResult] = []
    if not reason:
        info = {**result.get("info", {}), "wall_time": outcome.wall_time}
        try:
            results = steps.judge(suite, job, TrainOutput(outcome.arrays, info))
        except InvalidOutput as exc:
            reason, error = "invalid-output", f"the sandboxed trainer's output was rejected: {exc}"
    if reason:
        results = failed(job, error, reason, STATUS_OF_REASON[reason], outcome.wall_time)
    for r in results:
        r.captured = outcome.captured
        r.info = {**r.info, "sandbox": outcome.isolation}
    return results


# --- one child ------------------------------------------------------------------------


def run_child(suite: Suite, job: Job, code: str, filename: str,
              hyperparameters: Mapping[str, Any], limits: Limits, *, threads: int = 1,
              device: str = "cpu", heartbeat: Callable[[], None] | None = None,
              python_guard: bool = True) -> ChildOutcome:
    """Train one job of ``suite`` in a sandboxed child."""
    fields = {"suite": suite.name, "suite_version": suite.version, "plan": job.plan,
              "hyperparameters": dict(hyperparameters)}
    return _sandboxed(fields, job.inputs, code, filename, limits, threads, device, heartbeat,
                      python_guard, reader=lambda workdir: _read_result(workdir, suite))


def validate_sandboxed(code: str, filename: str,
                       overrides: Mapping[str, Any] | None = None) -> Validation:
    """The engine's validator (:func:`harness.objectives.validate.validate`) on untrusted
    code, in the sandbox; the returned objective carries metadata only, no callable hook."""
    from harness.objectives.validate import Problem

    outcome = _sandboxed({"task": "validate", "overrides": dict(overrides or {})}, {}, code,
                         filename, VALIDATION_LIMITS, 1, "cpu", None, True,
                         reader=_read_validation, arrays=False)
    validation = Validation(filename)
    violations = list(dict.fromkeys(outcome.violations))
    if outcome.reason or violations:
        message = ("\n".join(violations) if violations and not outcome.reason
                   else outcome.error or "the objective could not be checked")
        code_ = "sandbox" if outcome.reason != "objective" else "exception"
        validation.problems.append(Problem(code_, "error", message))
        return validation
    raw = outcome.result
    validation.problems = [Problem(p["code"], p["severity"], p["message"])
                           for p in raw.get("problems", [])]
    if "objective" in raw:
        validation.objective = _described_objective(raw["objective"], code, filename)
    return validation


def _sandboxed(fields: dict[str, Any], inputs: Mapping[str, np.ndarray], code: str,
               filename: str, limits: Limits, threads: int, device: str,
               heartbeat: Callable[[], None] | None, python_guard: bool,
               reader: Callable[[Path], dict[str, Any]], *,
               arrays: bool = True) -> ChildOutcome:
    support = launcher.isolation_support()
    strict = os.environ.get("HARNESS_SANDBOX_STRICT", "") == "1"
    if strict and not (support["namespaces"] and support["landlock"] and seccomp.supported()):
        raise SandboxUnavailable(f"HARNESS_SANDBOX_STRICT=1 but this machine offers {support}")
    if strict and os.environ.get("HARNESS_SANDBOX_MODE") == "exec":
        raise SandboxUnavailable("HARNESS_SANDBOX_STRICT=1 needs the fork server: exec mode "
                                 "has no pids cgroup and no noexec work directory")
    base = os.environ.get("HARNESS_SANDBOX_DIR") or None
    workdir = Path(tempfile.mkdtemp(prefix="harness-sandbox-", dir=base))
    uid = launcher.sandbox_uid(support)
    try:
        (workdir / "tmp").mkdir()
        (workdir / filename).write_text(code, encoding="utf-8")
        if inputs:
            np.savez(workdir / "inputs.npz", **inputs)
        (workdir / "job.json").write_text(json.dumps({
            **fields, "objective_file": filename, "threads": threads, "device": device,
            "suite_packages": registry.import_roots(),
            "python_guard": python_guard, "landlock": support["landlock"] > 0,
            "seccomp": seccomp.supported(), "pid_namespace": support["namespaces"]}))
        if uid is not None:
            _chown_tree(workdir, uid)
        spec = launcher.Launch(workdir, _rlimits(limits), uid, support["namespaces"], threads,
                               device)
        outcome = _supervise(spec, limits, heartbeat, reader, arrays=arrays)
        # What this process asked for; the child fails closed when it cannot apply a layer,
        # and nothing the child says about itself is recorded.
        outcome.isolation = {
            "mode": os.environ.get("HARNESS_SANDBOX_MODE", "fork"),
            "namespaces": support["namespaces"], "uid": uid or 0,
            "landlock": support["landlock"] if support["landlock"] > 0 else None,
            "seccomp": seccomp.supported(), "python_guard": python_guard,
            "pids_cgroup": outcome.pids_cgroup}
        _scrub(outcome, workdir)
        return outcome
    finally:
        if uid is not None and not support["namespaces"]:
            launcher.kill_uid(uid)  # no PID namespace took the objective's processes with it
        shutil.rmtree(workdir, ignore_errors=True)


def _read_validation(workdir: Path) -> dict[str, Any]:
    """The validator's problems and the objective's description, type-checked."""
    raw = _load_json(workdir / "result.json")
    problems = raw.get("problems")
    if not isinstance(problems, list):
        return {}
    clean = [{"code": str(p.get("code", ""))[:50], "severity":
              "warning" if p.get("severity") == "warning" else "error",
              "message": str(p.get("message", ""))[:5000]}
             for p in problems[:50] if isinstance(p, dict)]
    report: dict[str, Any] = {"problems": clean}
    o = raw.get("objective")
    if isinstance(o, dict) and isinstance(o.get("hooks"), list):
        hooks = registry.hooks()
        hp = o.get("hyperparameters") if isinstance(o.get("hyperparameters"), dict) else {}
        defaults = o.get("defaults") if isinstance(o.get("defaults"), dict) else {}
        context = o.get("context") if isinstance(o.get("context"), dict) else {}
        report["objective"] = {
            "name": str(o.get("name", ""))[:200],
            "description": str(o.get("description", ""))[:5000],
            "hooks": [h for h in o["hooks"] if h in hooks],
            "hyperparameters": {str(k): v for k, v in hp.items()
                                if isinstance(v, str | int | float | bool | None)},
            "defaults": {str(k): v for k, v in defaults.items()
                         if isinstance(v, str | int | float | bool | None)},
            "context": {str(k): tuple(str(n) for n in v) for k, v in context.items()
                        if k in hooks and isinstance(v, list)}}
    return report


def _described_objective(o: Mapping[str, Any], code: str, filename: str) -> Objective:
    def not_here(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a submitted objective's hooks run only in the sandbox")

    return Objective(name=o["name"], origin="file", source=code,
                     hooks={h: not_here for h in o["hooks"]}, defaults=o["defaults"],
                     hyperparameters=o["hyperparameters"], description=o["description"],
                     path=filename, context=o["context"])


def _scrub(outcome: ChildOutcome, workdir: Path) -> None:
    """Messages name the user's file, never the server's work directory."""
    prefix = str(workdir) + "/"
    outcome.error = outcome.error.replace(prefix, "")
    outcome.captured = outcome.captured.replace(prefix, "")
    if isinstance(outcome.result.get("error"), str):
        outcome.result["error"] = outcome.result["error"].replace(prefix, "")
    if isinstance(outcome.result.get("violations"), list):
        outcome.result["violations"] = [str(v).replace(prefix, "")
                                        for v in outcome.result["violations"]]


def _rlimits(limits: Limits) -> dict[str, tuple[int, int]]:
    cpu = max(int(limits.cpu_seconds), 1)
    return {"RLIMIT_AS": (limits.memory_bytes,) * 2, "RLIMIT_CPU": (cpu, cpu + 5),
            "RLIMIT_NOFILE": (limits.open_files,) * 2, "RLIMIT_NPROC": (limits.processes,) * 2,
            "RLIMIT_FSIZE": (limits.disk_bytes,) * 2, "RLIMIT_CORE": (0, 0)}


def _supervise(spec: launcher.Launch, limits: Limits, heartbeat: Callable[[], None] | None,
               reader: Callable[[Path], dict[str, Any]], *,
               arrays: bool = True) -> ChildOutcome:
    start = time.monotonic()
    child = launcher.launch(spec)
    capture = _Capture(child.output, limits.output_bytes, kill_after=256 * limits.output_bytes)
    reason, ended = "", None
    last_beat = last_disk = start
    try:
        while (ended := child.poll()) is None:
            now = time.monotonic()
            if not reason:
                if now - start > limits.wall_seconds:
                    reason = "wall"
                elif capture.overflowed:
                    reason = "output"
                elif now - last_disk > 0.5:
                    last_disk = now
                    if _disk_usage(spec.workdir) > limits.disk_bytes:
                        reason = "disk"
                if reason:
                    child.kill()
            if heartbeat is not None and now - last_beat > HEARTBEAT_SECONDS:
                last_beat = now
                try:
                    heartbeat()
                except Exception:  # a database blip must not kill a healthy cell
                    log.warning("heartbeat failed", exc_info=True)
            time.sleep(POLL_SECONDS)
    except BaseException:
        child.kill()  # an interrupted worker leaves no child behind
        child.close()
        raise
    child.close()
    code, cpu = ended
    capture.join()
    outcome = ChildOutcome(captured=capture.text(), wall_time=time.monotonic() - start,
                           violations=capture.violations,
                           pids_cgroup=bool(getattr(child, "pids_cgroup", False)))
    if reason:
        outcome.reason, outcome.error = reason, _limit_message(reason, limits, capture.total)
        return outcome
    outcome.result = reader(spec.workdir)
    if code == SETUP_FAILED and not capture.ready:
        raise SandboxUnavailable(f"the sandbox could not be set up: {outcome.captured[-500:]}")
    if code == VIOLATION_EXIT or (code != 0 and outcome.violations):
        outcome.reason = "violation"
        outcome.error = "\n".join(outcome.violations) or (
            "the objective attempted a forbidden action (its report of it was hidden)")
        return outcome
    if code != 0 or not outcome.result:
        outcome.reason, outcome.error = _exit_reason(code, cpu, limits)
        return outcome
    if arrays and not outcome.result.get("error"):
        try:
            outcome.arrays = _read_outputs(spec.workdir / "outputs.npz", limits.disk_bytes)
        except InvalidOutput as exc:
            outcome.reason, outcome.error = "invalid-output", str(exc)
    return outcome


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


def _read_result(workdir: Path, suite: Suite) -> dict[str, Any]:
    """The child's result, reduced to fields of the expected types (the objective's code
    ran in the process that wrote it): its error, or the trainer's info with the fields
    every trainer reports and those the suite declares (``Suite.train_info``); the judge
    checks their values. The wall time is always this process's measure."""
    raw = _load_json(workdir / "result.json")
    if not raw:
        return {}
    result: dict[str, Any] = {}
    for key in ("error", "reason"):
        if isinstance(raw.get(key), str):
            result[key] = raw[key][:20_000]
    if isinstance(raw.get("violations"), list):
        result["violations"] = [v[:500] for v in raw["violations"][:20] if isinstance(v, str)]
    info = raw.get("info") if isinstance(raw.get("info"), dict) else {}
    kept: dict[str, Any] = {}
    for key, kind in {**GENERIC_INFO, **suite.train_info}.items():
        value = _typed(info.get(key), kind)
        if value is not None:
            kept[key] = value
    if not result.get("error"):
        result["info"] = kept
    return result


# What every trainer reports about how it trained (harness.train.TrainResult).
GENERIC_INFO: dict[str, type] = {"mode": str, "fallback_reason": str}


def _typed(value: Any, kind: type) -> Any:
    """``value`` if it has the declared type (a dict: of short string keys and scalar
    values); None otherwise. Strings are truncated."""
    if kind not in INFO_TYPES or isinstance(value, bool) and kind is not bool:
        return None
    if kind is dict:
        if not isinstance(value, dict):
            return None
        return {k[:100]: (v[:2000] if isinstance(v, str) else v)
                for k, v in list(value.items())[:50]
                if isinstance(k, str) and isinstance(v, str | bool | int | float)}
    if kind is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, kind):
        return None
    return value[:2000] if isinstance(value, str) else value


def _load_json(path: Path) -> dict[str, Any]:
    try:
        if path.is_symlink() or path.stat().st_size > MAX_REPORT_BYTES:
            return {}
        raw = json.loads(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable, malformed or nested past the recursion limit
        return {}
    return raw if isinstance(raw, dict) else {}


def _read_outputs(path: Path, max_bytes: int = 1 << 30) -> dict[str, np.ndarray]:
    """The child's arrays, mapped read-only straight from the ``.npz`` (no inflating, no
    copy, no unpickling: a pickle payload or an object array is an invalid output).

    Members must be stored uncompressed, as ``np.savez`` writes them; each ``.npy``
    header is parsed with numpy's own reader and its declared size checked against the
    member's bytes before anything is mapped.
    """
    if path.is_symlink() or not path.is_file():
        raise InvalidOutput("the trainer returned no outputs file")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InvalidOutput(f"outputs are not plain numpy arrays (not an .npz: {exc})") from None
    if len(members) > 1024:
        raise InvalidOutput(f"outputs hold {len(members)} arrays; at most 1024 are accepted")
    if any(m.compress_type != zipfile.ZIP_STORED for m in members):
        raise InvalidOutput("outputs must be stored uncompressed (as np.savez writes them)")
    if sum(m.file_size for m in members) > max_bytes:
        raise InvalidOutput(f"outputs declare more than {max_bytes:,} bytes")
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
        for member in members:
            name = member.filename.removesuffix(".npy")
            try:
                arrays[name] = _map_member(f, path, member)
            except InvalidOutput:
                raise
            except Exception as exc:  # noqa: BLE001 - any malformed header is invalid output
                raise InvalidOutput(f"outputs are not plain numpy arrays ({name}: "
                                    f"{type(exc).__name__}: {str(exc)[:200]})") from None
    return arrays


def _map_member(f: Any, path: Path, member: zipfile.ZipInfo) -> np.ndarray:
    f.seek(member.header_offset)
    local = f.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise InvalidOutput("outputs are not plain numpy arrays (a damaged .npz)")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    start = member.header_offset + 30 + name_len + extra_len
    end = start + member.file_size
    f.seek(start)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if dtype.hasobject:
        raise InvalidOutput("outputs are not plain numpy arrays (an object array, i.e. a "
                            "pickle)")
    offset = f.tell()
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < 0 or offset + nbytes > end:
        raise InvalidOutput(f"outputs are not plain numpy arrays ({member.filename} declares "
                            f"more bytes than it holds)")
    if nbytes == 0:
        return np.empty(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                     order="F" if fortran else "C")


# --- output capture ---------------------------------------------------------------------


class _Capture:
    """Reads the child's output on a thread; keeps the head, counts the rest."""

    def __init__(self, stream: Any, keep: int, kill_after: int) -> None:
        self.keep, self.kill_after = keep, kill_after
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.violations: list[str] = []
        self.ready = False  # the child said it is locked down
        self._line = bytearray()  # the current line, scanned for the guard's marker
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    @property
    def overflowed(self) -> bool:
        return self.total > self.kill_after

    def _read(self, stream: Any) -> None:
        with stream:
            while chunk := os.read(stream.fileno(), 65536):
                self.total += len(chunk)
                room = self.keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                self.tail = (self.tail + chunk)[-4096:]
                self._scan(chunk)

    def _scan(self, chunk: bytes) -> None:
        marker = MARKER.encode()  # the guard starts every report on a fresh line
        lines = (bytes(self._line) + chunk).split(b"\n")
        self._line = bytearray(lines.pop()[-4096:])
        for line in lines:
            if not self.ready and line == READY.encode():
                self.ready = True
            if line.startswith(marker) and len(self.violations) < 20:
                self.violations.append(line[len(marker):].decode("utf-8", "replace")[:500])

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


# --- isolation support and helpers ---------------------------------------------------------


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, _, files in os.walk(root):
        os.chown(dirpath, uid, uid)
        for name in files:
            os.chown(os.path.join(dirpath, name), uid, uid)


def _disk_usage(root: Path, max_entries: int = 20_000) -> int:
    total, seen = 0, 0
    stack = [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
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
