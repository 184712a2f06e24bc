"""The part of judging every suite shares: a job's cells ended without results, and the
record of the group they trained in. A suite's ``judge`` computes only its own metrics."""

from __future__ import annotations

from harness.contract.chunks import Chunk
from harness.contract.pipeline import Job
from harness.contract.suite import CellResult


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
