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

Declarations only: :mod:`harness.runner` chains the three (in one process for the CLI and
built-in baselines; with the loss served from the sandbox for submissions).
See ``docs/suite-contract.md``.
"""

from __future__ import annotations

import errno
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.contract.suite import CellResult, Suite, Variant

if TYPE_CHECKING:
    import numpy as np

    from harness.objectives.loading import LoadedObjective

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

    # A tuned run (harness/runner/tuning.py) trains each of a job's members once per
    # trial: the inputs (a trailing "*" names a prefix) and plan entries that hold one row
    # per member, which it repeats per trial; a Job.private with per-member rows repeats
    # them in its own ``repeated(k)``. () = the suite has no tuned protocol.
    member_inputs: tuple[str, ...] = ()
    member_plan: tuple[str, ...] = ()
    # whether train() binds each member's own hyperparameter values whatever they are
    # (looping where non-numbers differ); False: only numbers may differ between members
    binds_choices: bool = False

    @abstractmethod
    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """The jobs covering every (variant, seed) member; trusted."""

    @abstractmethod
    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
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
        :func:`harness.runner.jobs.prepare_fixtures` to build before any job starts; none by
        default."""
        return []


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
