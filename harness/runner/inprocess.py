"""Trusted objectives trained and judged in this process, chunk by chunk (the CLI's workers,
built-in baselines on a Celery worker, notebooks and tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.contract.judging import failed, grouped
from harness.contract.pipeline import InvalidOutput
from harness.contract.suite import CellResult, Suite
from harness.runner.jobs import asked, chunk_jobs, share_of, train_safely

if TYPE_CHECKING:
    from harness.objectives.loading import LoadedObjective


def run_cells(suite: Suite, objective: LoadedObjective, variants: list[str], seeds: list[int], *,
              data_root: str | None = None, download: bool = False,
              progress: Callable[[float], None] | None = None,
              **options: Any) -> list[CellResult]:
    """Every (variant, seed) cell of ``objective``: prepare → train → judge in this process
    (trusted objectives only), chunk by chunk."""
    from harness.contract.registry import pipeline

    steps = pipeline(suite)
    results: list[CellResult] = []
    for chunk, job in chunk_jobs(steps, suite, [suite.variant(v) for v in variants], seeds,
                                 data_root=data_root,
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
