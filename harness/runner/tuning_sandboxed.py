"""The tuned protocol (:mod:`harness.runner.tuning`) for a submitted objective: its loss
served from the sandbox, everything else here.

The protocol is the same: the same ``k`` trials, the same search seeds and validation split,
the same choice, the chosen trial on the final seeds. One difference in how it trains: a
loss server binds the hyperparameters it loaded (and there is one server per member), so
the search runs one sandboxed job per trial, its search seeds the batch. At the protocol's
five search seeds a trial is already a batch, so this costs little against one job of every
trial (bench/README.md, "tuning": 1.04×), and a job's servers stay as many as a default
run's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from harness.contract.chunks import Chunk
from harness.contract.suite import CellResult, Suite
from harness.runner.tuning import (
    Trial,
    Tuned,
    choose,
    nothing_chosen,
    repeated,
    trials_for,
)


def tune_sandboxed(suite: Suite, code: str, filename: str, overrides: Mapping[str, Any],
                   variant: str, seeds: list[int], *, threads: int = 1, device: str = "cpu",
                   heartbeat: Callable[[], None] | None = None,
                   progress: Callable[[float], None] | None = None,
                   data_root: str | None = None, row_secret: bytes | None = None) -> Tuned:
    """Search, choose and train the final seeds of one (submitted objective, variant) on a
    suite version with a tuned protocol (``suite``: the suite at its default version).

    Never raises for anything the objective does: a trial that fails is never chosen, and
    an objective the sandbox cannot describe fails its final cells with the reason. Raises
    for infrastructure problems, as :func:`~harness.runner.sandboxed.run_cells_sandboxed`.
    ``progress`` counts final cells: the whole protocol adds up to ``len(seeds)``."""
    from harness.runner.sandboxed import run_cells_sandboxed
    from harness.sandbox.validation import validate_sandboxed

    start = time.monotonic()
    described = validate_sandboxed(code, filename, overrides)
    if described.objective is None:
        error = "; ".join(p.message for p in described.problems if p.severity == "error")
        return Tuned(variant, [], {}, None, [
            CellResult(variant, s, "failed", reason="objective",
                       error=error or "the objective could not be loaded") for s in seeds],
            time.monotonic() - start)
    trials = trials_for(suite, described.objective)
    search_seeds = list(suite.tuning.search_seeds)
    members = len(trials) * len(search_seeds) + len(seeds)
    share = None if progress is None else (lambda cells: progress(cells * len(seeds) / members))
    searched: dict[int, list[CellResult]] = {}
    for trial in trials:
        cells = _search(suite, code, filename, {**overrides, **trial.hyperparameters}, variant,
                        trial, search_seeds, threads=threads, device=device,
                        heartbeat=heartbeat, progress=share, data_root=data_root,
                        row_secret=row_secret)
        searched[trial.index] = [replace(c, info={**c.info, "tuned": trial.record(),
                                                  "split": "validation"}) for c in cells]
    chosen = choose(suite, searched)
    if chosen is None:
        final = nothing_chosen(variant, seeds)
    else:
        trial = trials[chosen]
        final = run_cells_sandboxed(
            suite.tuned(trial.settings), code, filename,
            {**overrides, **trial.hyperparameters}, [variant], seeds, threads=threads,
            device=device, heartbeat=heartbeat, progress=share, data_root=data_root,
            row_secret=row_secret)
        for cell in final:
            cell.info = {**cell.info, "tuned": trial.record()}
    return Tuned(variant, trials, searched, chosen, final, time.monotonic() - start)


def _search(suite: Suite, code: str, filename: str, hyperparameters: Mapping[str, Any],
            variant: str, trial: Trial, seeds: list[int], *, threads: int,
            device: str, heartbeat: Callable[[], None] | None,
            progress: Callable[[float], None] | None, data_root: str | None,
            row_secret: bytes | None) -> list[CellResult]:
    """The search cells of one trial as one sandboxed job (its settings on every member,
    its hyperparameters bound by the servers)."""
    from harness.contract.registry import pipeline
    from harness.runner.sandboxed import _run_job
    from harness.sandbox.process import Limits

    steps = pipeline(suite)
    searching = suite.trial(None)
    jobs = steps.prepare(searching, [suite.variant(variant)], seeds, data_root=data_root,
                         download=False)
    if len(jobs) != 1 or not (steps.member_inputs or steps.member_plan):
        raise ValueError(f"suite {suite.name!r}: its pipeline does not declare a tuned "
                         f"search (Pipeline.member_inputs, member_plan)")
    job = repeated(jobs[0], steps, [trial], suite.settings)
    per_member = {k: v for k, v in job.plan["per_member"].items() if k != "hyper"}
    job = replace(job, plan={**job.plan, "per_member": per_member})  # bound at load
    chunk = Chunk(variant, seeds[0] // len(seeds), len(seeds), tuple(seeds))
    if chunk.seeds != seeds:
        raise ValueError(f"suite {suite.name!r}: search seeds {seeds} are not one chunk")
    return _run_job(steps, searching, chunk, job, code, filename, hyperparameters,
                    Limits.for_run(searching, len(job.members), threads), device=device,
                    heartbeat=heartbeat, progress=progress, python_guard=True,
                    row_secret=row_secret)
