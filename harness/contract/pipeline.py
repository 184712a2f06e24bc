"""Train inside, judge outside: the three steps every suite implements.

A suite's :class:`Pipeline` (named by ``Suite.pipeline``) has

- ``prepare(suite, variants, seeds)`` → jobs. Trusted. A :class:`Job` is one batched
  training run of several (variant, seed) *members*; its ``inputs`` (numpy arrays) and
  ``plan`` (JSON) are all its trainer may see (noisy training labels, unlabeled test
  inputs); ``private`` (clean and test labels) stays with the judge.
- ``train(suite, objective, inputs, plan)`` → :class:`TrainOutput`. Runs the objective
  (inside the sandbox for submissions): numpy arrays out (weights, predictions, curves)
  and a JSON ``info`` of how it trained. The objective's own failures raise
  :class:`harness.train.ObjectiveRuntimeError`.
- ``judge(suite, job, output)`` → one :class:`harness.contract.suite.CellResult` per member.
  Trusted: validates every array (raising :class:`InvalidOutput`) and computes every
  metric. ``output.info`` is untrusted too: the sandbox keeps only the fields the suite
  declares in ``Suite.train_info``, and the judge checks their values.

:func:`run_in_process` chains the three in one process (the CLI, built-in baselines);
the sandbox (:mod:`harness.sandbox`) runs ``train`` in an isolated child instead.
See ``docs/suite-contract.md``.
"""

from __future__ import annotations

import errno
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.contract.suite import CellResult, Suite, Variant

if TYPE_CHECKING:
    import numpy as np

    from harness.contract.chunks import Chunk
    from harness.objectives.loading import Objective

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


@dataclass
class TrainOutput:
    """What ``train`` returns: arrays, how it trained, or why it could not."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # mode, fallback_reason, wall_time, …
    error: str = ""  # set when the objective failed; no arrays then
    reason: str = ""  # a key of harness.contract.suite.REASONS for that failure


class Pipeline(ABC):
    """prepare → train → judge for one suite (see the module docstring)."""

    @abstractmethod
    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """The jobs covering every (variant, seed) member; trusted."""

    @abstractmethod
    def train(self, suite: Suite, objective: Objective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        """Train one job's members with the objective; ``progress(cells)`` reports the
        fraction of cells done since the last call."""

    @abstractmethod
    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        """Every member's result from the trainer's output, after checking all of it."""

    def fixtures(self, suite: Suite, variants: list[Variant],
                 seeds: list[int]) -> list[tuple[str, int | None, dict[str, Any] | None]]:
        """The fixture entries ``prepare`` loads (name, seed, extra config), for
        :func:`prepare_fixtures` to build before any job starts; none by default."""
        return []


def prepare_fixtures(suite: Suite, variants: list[Variant], seeds: list[int], *,
                     data_root: str | None = None, download: bool = False) -> str:
    """Build (or find) every fixture the cells' chunks need (the seeds asked for and their
    chunks' other seeds: :mod:`harness.contract.chunks`), once, before workers start: a summary
    such as ``"6 reused, 0 built"`` ('' for a suite without fixtures). ``data_root`` and
    ``download`` reach the builders (where a real data set is), not the keys."""
    from harness.contract.chunks import chunks
    from harness.contract.registry import pipeline
    from harness.data import fixtures

    steps, by_name = pipeline(suite), {v.name: v for v in variants}
    needed: list[tuple[str, int | None, dict[str, Any] | None]] = []
    for chunk in chunks(suite, by_name, seeds):  # a chunk's every seed trains
        needed += [e for e in steps.fixtures(suite, [by_name[chunk.variant]], chunk.seeds)
                   if e not in needed]
    if not needed:
        return ""
    ledger = fixtures.Ledger()
    where = {"data_root": data_root, "download": download}
    for name, seed, config in needed:
        fixtures.load(suite, name, seed, config, ledger=ledger, where=where)
    return ledger.summary()


def train_safely(pipeline: Pipeline, suite: Suite, objective: Objective,
                 inputs: Mapping[str, Any], plan: Mapping[str, Any],
                 **options: Any) -> TrainOutput:
    """``pipeline.train``, with an objective failure turned into an output instead of raising."""
    from harness.objectives.loading import user_traceback
    from harness.train import ObjectiveRuntimeError

    try:
        return pipeline.train(suite, objective, dict(inputs), dict(plan), **options)
    except ObjectiveRuntimeError as exc:
        cause = exc.__cause__ or exc
        message = f"{exc}\n{user_traceback(cause, objective.path)}".rstrip()
        return TrainOutput(error=message, reason=failure_reason(cause))


def failure_reason(exc: BaseException) -> str:
    """``memory`` for allocation failures (the address-space limit), ``invalid-output`` for
    outputs a trainer refused, else ``objective``."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, InvalidOutput):
        return "invalid-output"
    text = str(exc).lower()
    if isinstance(exc, RuntimeError) and any(m in text for m in MEMORY_MESSAGES):
        return "memory"
    if type(exc).__name__ == "SandboxViolation":
        return "violation"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT):
        return "disk"
    return "objective"


def failed(job: Job, error: str, reason: str = "objective", status: str = "failed",
           wall_time: float = 0.0) -> list[CellResult]:
    """Every member of ``job`` ended without a result, for the same reason."""
    per_cell = wall_time / max(len(job.members), 1)
    return [CellResult(v, s, status, error=error, reason=reason or "objective",
                       wall_time=per_cell) for v, s in job.members]


def chunk_jobs(steps: Pipeline, suite: Suite, variants: list[Variant], seeds: list[int], *,
               data_root: str | None = None,
               download: bool = False) -> Iterator[tuple[Chunk, Job]]:
    """The jobs training ``variants × seeds``: each canonical chunk covering them
    (:mod:`harness.contract.chunks`) prepared on its own, one at a time, so that a cell trains with
    the same members in the same places however many cells were asked for."""
    from harness.contract.chunks import chunks

    by_name = {v.name: v for v in variants}
    for chunk in chunks(suite, by_name, seeds):
        for job in steps.prepare(suite, [by_name[chunk.variant]], chunk.seeds,
                                 data_root=data_root, download=download):
            yield chunk, job


def asked(chunk: Chunk, results: list[CellResult]) -> list[CellResult]:
    """The results of the cells asked for; the chunk's other seeds trained only to keep
    its shape."""
    return [r for r in results if r.variant == chunk.variant and r.seed in chunk.wanted]


def share_of(chunk: Chunk, job: Job,
             progress: Callable[[float], None] | None) -> Callable[[float], None] | None:
    """``progress`` counting only the cells asked for (the trainer reports all members)."""
    if progress is None:
        return None
    part = sum(1 for v, s in job.members if v == chunk.variant and s in chunk.wanted)
    scale = part / max(len(job.members), 1)
    return lambda cells: progress(cells * scale)


def run_in_process(suite: Suite, objective: Objective, variants: list[Variant],
                   seeds: list[int], *, data_root: str | None = None, download: bool = False,
                   progress: Callable[[float], None] | None = None,
                   **options: Any) -> list[CellResult]:
    """prepare → train → judge in this process (trusted objectives only), chunk by chunk."""
    from harness.contract.registry import pipeline

    steps = pipeline(suite)
    results: list[CellResult] = []
    for chunk, job in chunk_jobs(steps, suite, variants, seeds, data_root=data_root,
                                 download=download):
        start = time.monotonic()
        output = train_safely(steps, suite, objective, job.inputs, job.plan,
                              progress=share_of(chunk, job, progress), **options)
        if output.error:
            judged = failed(job, output.error, output.reason)
        else:
            try:
                judged = steps.judge(suite, job, output, device=options.get("device", "cpu"))
            except InvalidOutput as exc:  # e.g. a post-hoc hook's output the judge refuses
                judged = failed(job, str(exc), "invalid-output")
        results += grouped(job, asked(chunk, judged), time.monotonic() - start, chunk)
    return results


def grouped(job: Job, results: list[CellResult], seconds: float,
            chunk: Chunk) -> list[CellResult]:
    """``results`` recording the group they trained in: its chunk, how many members and the
    torch threads that trained them (docs/reproducibility.md), and its wall time, trained
    and judged together (a cell's ``wall_time`` is its share: the group's over its
    members)."""
    import torch

    for r in results:
        r.info = {**r.info, "group_members": len(job.members),
                  "group_seconds": round(seconds, 3), "chunk": chunk.record(),
                  "torch_threads": torch.get_num_threads()}
    return results
