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
submission (:func:`harness.sandbox.validation.validate_sandboxed`) runs the engine's
validator in the same sandbox.

Layers the kernel refuses (no namespaces inside an unprivileged container, no Landlock)
are skipped and recorded in each cell's environment; with ``HARNESS_SANDBOX_STRICT=1`` a
missing layer is an infrastructure error instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from harness.contract import registry
from harness.contract.chunks import Chunk
from harness.contract.judging import failed, grouped
from harness.contract.pipeline import InvalidOutput, Job, Pipeline
from harness.contract.suite import CellResult, Suite
from harness.runner.jobs import asked, chunk_jobs, share_of
from harness.sandbox.launch import SandboxUnavailable
from harness.sandbox.process import STATUS_OF_REASON, Limits
from harness.sandbox.remote import LossServers, RemoteError, ServerEnded
from harness.sandbox.traced import CallTimeout


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
            servers.end_requests()  # the judge never calls the objective: they exit meanwhile
            results = steps.judge(suite, job, out, device=device)
        except ObjectiveRuntimeError as exc:
            reason, error = _failure(exc.__cause__ or exc)
        except SandboxUnavailable:  # no server could start: this machine's, retried
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the objective made the trusted
            reason, error = _failure(exc)  # side raise is its failure, never a retry
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
    if isinstance(exc, CallTimeout):  # a traced call still running at the job's deadline
        return "wall", str(exc)
    if isinstance(exc, InvalidOutput):  # the judge refused what the objective produced
        return "invalid-output", str(exc)
    return "objective", f"{type(exc).__name__}: {exc}"
