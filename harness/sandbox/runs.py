"""Submitted objectives: only their loss runs in the sandbox; everything else here.

Train outside, serve the loss inside, judge outside (docs/sandbox.md). The trusted
worker prepares the suite's job, trains every member itself with the suite's own
trainer, and for each hook call asks the member's sandboxed loss server
(:mod:`harness.sandbox.remote`) for that member's loss and its gradients with respect to the
tensors the hook was sent. The server process holds the objective and nothing else: no
model, no data set, no weights, no other member's labels, no test inputs; so there is
nothing it could return that changes more than its own loss. Every metric is computed
here by the suite's judge.

Each server runs in fresh network, PID, IPC and mount namespaces, with no capabilities,
under rlimits and per-process cgroups, behind Landlock, seccomp and an audit-hook guard
(:mod:`harness.sandbox.process`, :mod:`harness.sandbox.launch`). Checking code at
submission (:func:`validate_sandboxed`) runs the engine's validator in the same sandbox.

Layers the kernel refuses (no namespaces inside an unprivileged container, no Landlock)
are skipped and recorded in each cell's environment; with ``HARNESS_SANDBOX_STRICT=1`` a
missing layer is an infrastructure error instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.contract import registry
from harness.contract.chunks import Chunk
from harness.contract.pipeline import (
    InvalidOutput,
    Job,
    Pipeline,
    asked,
    chunk_jobs,
    failed,
    grouped,
    share_of,
)
from harness.contract.suite import CellResult, Suite
from harness.objectives.loading import Objective
from harness.objectives.validate import Validation
from harness.sandbox.launch import SandboxUnavailable, isolation_support
from harness.sandbox.process import STATUS_OF_REASON, Limits, Process
from harness.sandbox.remote import LossServers, RemoteError, ServerEnded

__all__ = ["Limits", "SandboxUnavailable", "isolation_support", "run_cells_sandboxed",
           "validate_sandboxed"]

log = logging.getLogger(__name__)

MAX_REPORT_BYTES = 1 << 20
# Checking code at submission: the validator's smoke batches take well under a second.
VALIDATION_LIMITS = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=4 << 30,
                           disk_bytes=64 << 20, output_bytes=64 << 10)


def run_cells_sandboxed(suite: Suite, code: str, filename: str,
                        hyperparameters: Mapping[str, Any], variants: list[str],
                        seeds: list[int], *, threads: int = 1, device: str = "cpu",
                        heartbeat: Callable[[], None] | None = None,
                        progress: Callable[[float], None] | None = None,
                        limits: Limits | None = None, python_guard: bool = True,
                        data_root: str | None = None,
                        row_secret: bytes | None = None) -> list[CellResult]:
    """Every (variant, seed) cell of an untrusted objective: trained here, its loss served
    from the sandbox, judged here.

    Never raises for anything the objective does; raises for infrastructure problems
    (the caller retries those). ``threads`` is this process's torch threads for training;
    ``progress`` gets the trainer's reports (cells' worth of training done since the last).
    ``row_secret``: the version's row-order key as a server gave it
    (:func:`harness.sandbox.remote.version_row_key`); by default this machine's.
    """
    steps = registry.pipeline(suite)
    results: list[CellResult] = []
    for chunk, job in chunk_jobs(steps, suite, [suite.variant(v) for v in variants], seeds,
                                 data_root=data_root, download=False):
        run_limits = limits or Limits.for_run(suite, len(job.members), threads)
        results += _run_job(steps, suite, chunk, job, code, filename, hyperparameters,
                            run_limits, device=device, heartbeat=heartbeat,
                            progress=share_of(chunk, job, progress), python_guard=python_guard,
                            row_secret=row_secret)
    return results


def _run_job(steps: Pipeline, suite: Suite, chunk: Chunk, job: Job, code: str, filename: str,
             hyperparameters: Mapping[str, Any], limits: Limits, *, device: str,
             heartbeat: Callable[[], None] | None,
             progress: Callable[[float], None] | None = None,
             python_guard: bool, row_secret: bytes | None = None) -> list[CellResult]:
    import time

    from harness.train import ObjectiveRuntimeError

    start = time.monotonic()
    reason, error = "", ""
    results: list[CellResult] = []
    with LossServers(len(job.members), code, filename, hyperparameters, limits,
                     device=device, python_guard=python_guard, heartbeat=heartbeat,
                     identity=json.dumps([suite.name, suite.version, job.members]),
                     row_secret=row_secret) as servers:
        try:
            servers.start()
            out = steps.train(suite, servers.objective(), dict(job.inputs), dict(job.plan),
                              device=device, mode="vmap", progress=progress)
            results = steps.judge(suite, job, out, device=device)
        except ObjectiveRuntimeError as exc:
            reason, error = _failure(exc.__cause__ or exc)
        except (ServerEnded, RemoteError, ValueError) as exc:
            reason, error = _failure(exc)
        late = servers.stop()
        if late[0] and not reason:
            reason, error = late
        captured, isolation = servers.captured(), servers.isolation()
    wall = time.monotonic() - start
    if reason:
        results = failed(job, error, reason, STATUS_OF_REASON.get(reason, "failed"), wall)
    results = asked(chunk, results)
    for r in results:
        r.captured = captured
        r.info = {**r.info, "sandbox": isolation}
    return grouped(job, results, wall, chunk)


def _failure(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, ServerEnded):
        return exc.reason, exc.error
    if isinstance(exc, RemoteError):
        return exc.reason, str(exc)
    if isinstance(exc, InvalidOutput):  # the judge refused what the objective produced
        return "invalid-output", str(exc)
    return "objective", f"{type(exc).__name__}: {exc}"


def validate_sandboxed(code: str, filename: str,
                       overrides: Mapping[str, Any] | None = None) -> Validation:
    """The engine's validator (:func:`harness.objectives.validate.validate`) on untrusted
    code, in the sandbox; the returned objective carries metadata only, no callable hook."""
    from harness.objectives.validate import Problem

    process = Process({"task": "validate", "overrides": dict(overrides or {})}, code,
                      filename, VALIDATION_LIMITS)
    try:
        while process.poll() is None and not process.watch():
            import time

            time.sleep(0.02)
        reason, error = process.explain()
        raw = {} if reason else _read_validation(process.workdir)
        if not reason and not raw:
            reason, error = "crash", "the validator ended without a report"
    finally:
        process.close()
    validation = Validation(filename)
    if reason:
        code_ = "sandbox" if reason != "objective" else "exception"
        validation.problems.append(Problem(code_, "error", process.scrub(error)))
        return validation
    validation.problems = [Problem(p["code"], p["severity"], process.scrub(p["message"]))
                           for p in raw.get("problems", [])]
    if "objective" in raw:
        validation.objective = _described_objective(raw["objective"], code, filename)
    return validation


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


def _load_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file the child wrote, its size checked before it is read."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
            return {}
        raw = json.loads(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable, malformed or nested past the recursion limit
        return {}
    return raw if isinstance(raw, dict) else {}
