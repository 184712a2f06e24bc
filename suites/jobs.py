"""Train inside, judge outside, as three functions every suite's protocol module defines.

- ``prepare(suite, variants, seeds, data_root=, download=) -> list[Job]``: trusted; a
  job's ``inputs`` (numpy arrays) and ``plan`` (JSON) are all its trainer may see
  (noisy training labels, unlabeled test inputs); ``private`` stays with the judge.
- ``train(suite, objective, inputs, plan, device=, mode=, progress=) -> outputs, report``:
  runs the objective (inside the sandbox for submissions); returns numpy arrays
  (predictions, weights, curves) and a JSON report. Objective failures raise
  :class:`harness.train.ObjectiveRuntimeError`.
- ``judge(suite, job, outputs, report) -> list[CellResult]``: trusted; validates the
  outputs (:class:`InvalidOutput`) and computes every metric.

:func:`run_in_process` chains them in one process (``Suite.run_cells``): the CLI and
built-in baselines.
The sandbox (:mod:`harness.sandbox`) runs ``train`` in an isolated child instead.
"""

from __future__ import annotations

import errno
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from suites.base import CellResult, Suite, Variant

MEMORY_MESSAGES = ("can't allocate memory", "not enough memory", "out of memory",
                   "cannot allocate memory")


class InvalidOutput(ValueError):
    """The trainer returned arrays the judge will not accept (shape, dtype, range, finiteness)."""


@dataclass
class Job:
    """One batched training run of ``members`` (variant, seed) pairs."""

    members: list[tuple[str, int]]
    inputs: dict[str, Any]  # name -> numpy array: what the trainer may see
    plan: dict[str, Any]  # JSON-safe settings for the trainer
    private: Any = None  # the judge's alone (clean labels, test labels)
    extra: dict[str, Any] = field(default_factory=dict)


def protocol_module(suite: Suite) -> ModuleType:
    return importlib.import_module(suite.runner)


def train_safely(module: ModuleType, suite: Suite, objective: Any, inputs: Mapping[str, Any],
                 plan: Mapping[str, Any], **options: Any) -> tuple[dict[str, Any], dict]:
    """``module.train``, with an objective failure turned into a report instead of raising."""
    from harness.objectives.loading import user_traceback
    from harness.train import ObjectiveRuntimeError

    try:
        return module.train(suite, objective, dict(inputs), dict(plan), **options)
    except ObjectiveRuntimeError as exc:
        cause = exc.__cause__ or exc
        message = f"{exc}\n{user_traceback(cause, objective.path)}".rstrip()
        return {}, {"error": message, "reason": failure_reason(cause)}


def failure_reason(exc: BaseException) -> str:
    """``memory`` for allocation failures (the address-space limit), else ``objective``."""
    if isinstance(exc, MemoryError):
        return "memory"
    text = str(exc).lower()
    if isinstance(exc, RuntimeError) and any(m in text for m in MEMORY_MESSAGES):
        return "memory"
    if type(exc).__name__ == "SandboxViolation":
        return "violation"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT):
        return "disk"
    return "objective"


def failed(job: Job, report: Mapping[str, Any], status: str = "failed") -> list[CellResult]:
    """Every member of ``job`` with the report's error."""
    return [CellResult(v, s, status, error=str(report.get("error", "")),
                       reason=str(report.get("reason") or "objective"))
            for v, s in job.members]


def run_in_process(suite: Suite, objective: Any, variants: list[Variant], seeds: list[int], *,
                   data_root: str | None = None, download: bool = False,
                   progress: Callable[[float], None] | None = None,
                   **options: Any) -> list[CellResult]:
    """prepare → train → judge in this process (trusted objectives only)."""
    module = protocol_module(suite)
    results: list[CellResult] = []
    for job in module.prepare(suite, variants, seeds, data_root=data_root, download=download):
        outputs, report = train_safely(module, suite, objective, job.inputs, job.plan,
                                       progress=progress, **options)
        if report.get("error"):
            results += failed(job, report)
            continue
        results += module.judge(suite, job, outputs, report)
    return results


def check_array(outputs: Mapping[str, Any], name: str, shape: tuple[int, ...], kinds: str,
                *, finite: bool = False, low: float | None = None,
                high: float | None = None) -> Any:
    """``outputs[name]`` if it is an array of ``shape`` whose dtype kind is in ``kinds``."""
    import numpy as np

    if name not in outputs:
        raise InvalidOutput(f"the trainer returned no {name!r}")
    a = outputs[name]
    if not isinstance(a, np.ndarray) or a.dtype.kind not in kinds or a.dtype == object:
        raise InvalidOutput(f"{name} must be a numeric array of kind {kinds!r}, "
                            f"got {getattr(a, 'dtype', type(a).__name__)}")
    if tuple(a.shape) != tuple(shape):
        raise InvalidOutput(f"{name} must have shape {tuple(shape)}, got {tuple(a.shape)}")
    if finite and a.size and not np.isfinite(a).all():
        raise InvalidOutput(f"{name} contains non-finite values")
    if a.size and low is not None and a.min() < low:
        raise InvalidOutput(f"{name} has values below {low}")
    if a.size and high is not None and a.max() > high:
        raise InvalidOutput(f"{name} has values above {high}")
    return a
