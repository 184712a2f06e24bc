"""The part of judging every suite shares (docs/suite-contract.md).

A suite's ``judge`` checks the trainer's arrays (``check_array`` and ``probability_rows``
of :mod:`harness.contract.outputs`), computes each member's metrics and curves, and hands
them to :func:`cell_results`, which builds the job's cells: status from divergence,
curves cut where a member froze, wall time and the ``info`` record. Also here: a job's
cells ended without results (:func:`failed`), and the record of the group they trained
in (:func:`grouped`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contract.chunks import Chunk
from harness.contract.pipeline import Job, TrainOutput
from harness.contract.suite import CellResult

Metrics = dict[str, float]
Curves = dict[str, list[float]]


@dataclass(frozen=True)
class Failure:
    """A member the judge cannot score: its cell fails with ``error`` and ``reason``
    (a key of ``harness.contract.suite.REASONS``). ``curves``: the cell keeps its
    training curves (what the trainer did is still worth seeing)."""

    error: str
    reason: str = "invalid-output"
    curves: bool = False


def cell_results(job: Job, output: TrainOutput,
                 member: Callable[[int], tuple[Metrics, Curves] | Failure], *,
                 diverged: Sequence[int] | None,
                 training: Callable[[int], Curves] | None = None,
                 steps_per_point: int | None = None,
                 kept: Callable[[int], Metrics] | None = None,
                 info: Mapping[str, Any] | None = None,
                 member_info: Callable[[int], Mapping[str, Any]] | None = None,
                 seconds: float | None = None,
                 fails_at_start: str | None = None) -> list[CellResult]:
    """Every member's cell of ``job``, in member order.

    ``member(i)``, called in member order for each member ``i`` that did not diverge, is the
    suite's part: ``(metrics, curves)``, or a :class:`Failure`; it may raise
    :class:`~harness.contract.pipeline.InvalidOutput`. The rest is the contract's:

    - ``diverged[i]``: the step at which member ``i`` diverged, or -1 (``None``: a suite
      whose members never diverge). A diverged member's cell is ``diverged`` with that
      step, its metrics those ``kept(i)`` names (none by default), its curves the training
      curves cut after the point of that step (``step // steps_per_point + 1`` points);
      ``fails_at_start``: the error of a member that diverged at step 0, which then fails
      as invalid output instead (nothing it did can be judged);
    - ``training(i)``: curves every member has, diverged or not (training loss, gradient
      norm, per-epoch evaluations), first among an ok cell's curves;
    - wall time: ``seconds`` (the trainer's ``wall_time`` by default) shared equally;
    - ``info``: the trainer's ``mode`` and ``fallback_reason``, ``members_batched``, then
      the suite's ``info`` and ``member_info(i)``.
    """
    m = len(job.members)
    if training is not None and steps_per_point is None:
        raise ValueError("training curves need steps_per_point to be cut at a divergence")
    total = float(output.info.get("wall_time") or 0.0) if seconds is None else seconds
    per_cell = total / m
    common = {"mode": str(output.info.get("mode", "")),
              "fallback_reason": output.info.get("fallback_reason"), "members_batched": m,
              **(info or {})}
    out = []
    for i, (variant, seed) in enumerate(job.members):
        cell = {**common, **(member_info(i) if member_info else {})}
        step = None if diverged is None or diverged[i] < 0 else int(diverged[i])
        if step == 0 and fails_at_start is not None:
            out.append(CellResult(variant, seed, "failed", error=fails_at_start,
                                  reason="invalid-output", wall_time=per_cell, info=cell))
            continue
        curves = training(i) if training else {}
        if step is not None:  # a frozen model's numbers are not a result
            points = step // steps_per_point + 1 if steps_per_point else 0
            out.append(CellResult(variant, seed, "diverged", kept(i) if kept else {},
                                  truncate(curves, points), diverged_step=step,
                                  wall_time=per_cell, info=cell))
            continue
        judged = member(i)
        if isinstance(judged, Failure):
            out.append(CellResult(variant, seed, "failed", {},
                                  curves if judged.curves else {}, error=judged.error,
                                  reason=judged.reason, wall_time=per_cell, info=cell))
            continue
        metrics, more = judged
        out.append(CellResult(variant, seed, "ok", metrics, {**curves, **more},
                              wall_time=per_cell, info=cell))
    return out


def truncate(curves: Mapping[str, list[float]], points: int) -> Curves:
    """Curves cut after ``points`` values: a diverged member's curves end where it froze."""
    return {k: v[:points] for k, v in curves.items()}


def failed(job: Job, error: str, reason: str = "objective", status: str = "failed",
           wall_time: float = 0.0) -> list[CellResult]:
    """Every member of ``job`` ended without a result, for the same reason."""
    per_cell = wall_time / max(len(job.members), 1)
    return [CellResult(v, s, status, error=error, reason=reason or "objective",
                       wall_time=per_cell) for v, s in job.members]


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
