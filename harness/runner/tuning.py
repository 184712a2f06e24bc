"""The tuned protocol: every objective, the reference included, tuned with the same budget.

For one (objective, variant) of a suite with a :class:`~harness.contract.suite.Tuning`:

1. **Trials**: ``k`` points of the one quasi-random sampler over the suite's tuned settings
   and the objective's ``SEARCH_SPACE`` (:func:`harness.objectives.search.trials`); an
   objective with no knobs of its own still gets ``k`` trials of the settings, the same
   ones every objective of the suite gets.
2. **Search**: every trial trained at once, the trials a batch dimension beside the seeds
   (``Tuning.search_seeds``, apart from the final seeds), on the training set less a
   validation split, judged on that split (suite version ``V+tunedK.search``; each trial's
   cells stored as ``V+tunedK.tI``).
3. **Selection**: the trial with the best mean of ``Tuning.metric`` (the headline by
   default) over its search seeds; a trial with a seed that diverged or failed is never
   chosen; ties go to the earlier trial.
4. **Final**: the chosen trial's settings and hyperparameters trained on the whole training
   set with the final seeds and judged on the test set, stored as ``V+tunedK`` under the
   objective's own version, each cell recording the trial it ran (``info["tuned"]``).

Nothing here reads a test label before step 4, and step 4 chooses nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from harness.contract.suite import CellResult, Suite


@dataclass(frozen=True)
class Trial:
    index: int
    settings: dict[str, Any]
    hyperparameters: dict[str, Any]

    def record(self) -> dict[str, Any]:
        return {"trial": self.index, "settings": dict(self.settings),
                "hyperparameters": dict(self.hyperparameters)}


@dataclass
class Tuned:
    """What tuning one (objective, variant) gave: each trial's search cells, the trial
    chosen (None when every trial failed) and the final cells."""

    variant: str
    trials: list[Trial]
    searched: dict[int, list[CellResult]]
    chosen: int | None
    final: list[CellResult]
    wall_time: float = 0.0


def trials_for(suite: Suite, objective: Any) -> list[Trial]:
    """The ``k`` trials of ``objective`` on ``suite`` (its declared space, the suite's)."""
    from harness.objectives.search import trials

    t = _tuning(suite)
    return [Trial(i, s, h) for i, (s, h) in enumerate(
        trials(t.dimensions(), objective.dimensions, t.k, t.seed))]


def choose(suite: Suite, searched: Mapping[int, list[CellResult]]) -> int | None:
    """The trial with the best mean validation metric over its seeds (every seed ok)."""
    t = _tuning(suite)
    metric = t.metric or suite.headline
    sign = 1.0 if suite.metric(metric).higher_is_better else -1.0
    best, best_score = None, -math.inf
    for index in sorted(searched):
        cells = searched[index]
        if not cells or any(c.status != "ok" or metric not in c.metrics for c in cells):
            continue
        score = sign * sum(c.metrics[metric] for c in cells) / len(cells)
        if math.isfinite(score) and score > best_score:
            best, best_score = index, score
    return best


def nothing_chosen(variant: str, seeds: list[int]) -> list[CellResult]:
    """The final cells when every trial diverged or failed: the objective's failure."""
    return [CellResult(variant, s, "failed", error="every trial of the tuned search "
                       "diverged or failed on the validation split: nothing to choose",
                       reason="objective") for s in seeds]


def search(suite: Suite, objective: Any, variant: str, trials: list[Trial], *,
           device: str = "cpu", mode: str = "auto", data_root: str | None = None,
           download: bool = False) -> dict[int, list[CellResult]]:
    """Every trial's search cells, trained as one batched job (trials × search seeds)."""
    from harness.contract.judging import failed
    from harness.contract.pipeline import InvalidOutput
    from harness.contract.registry import pipeline
    from harness.runner.jobs import train_safely

    steps = pipeline(suite)
    searching = suite.trial(None)
    seeds = list(_tuning(suite).search_seeds)
    jobs = steps.prepare(searching, [suite.variant(variant)], seeds, data_root=data_root,
                         download=download)
    if len(jobs) != 1 or not (steps.member_inputs or steps.member_plan):
        raise ValueError(f"suite {suite.name!r}: its pipeline does not declare a tuned "
                         f"search (Pipeline.member_inputs, member_plan)")
    job = repeated(jobs[0], steps, trials, suite.settings)
    start = time.monotonic()
    output = train_safely(steps, searching, objective, job.inputs, job.plan, device=device,
                          mode=mode)
    if output.error:
        judged = failed(job, output.error, output.reason)
    else:
        try:
            judged = steps.judge(searching, job, output, device=device)
        except InvalidOutput as exc:
            judged = failed(job, str(exc), "invalid-output")
    per_cell = (time.monotonic() - start) / max(len(judged), 1)
    out: dict[int, list[CellResult]] = {}
    for i, cell in enumerate(judged):
        trial = trials[i // len(seeds)]
        cell.wall_time = per_cell
        cell.info = {**cell.info, "tuned": trial.record(), "split": "validation"}
        out.setdefault(trial.index, []).append(cell)
    return out


def repeated(job: Any, steps: Any, trials: list[Trial], settings: Mapping[str, Any]) -> Any:
    """``job`` with its members once per trial (trial-major), the pipeline's per-member
    inputs (a name ending in ``*`` names a prefix) and plan entries repeated with them, a
    private part's per-member rows too (its ``repeated(k)``), and each member's trial
    settings in the plan (``per_member``: learning rate, weight decay, the objective's
    hyperparameters)."""
    import numpy as np

    k, m = len(trials), len(job.members)
    inputs = dict(job.inputs)
    for name in job.inputs:  # "source.*": every input named so
        if any(name == p or (p.endswith("*") and name.startswith(p[:-1]))
               for p in steps.member_inputs):
            inputs[name] = np.concatenate([job.inputs[name]] * k)
    plan = dict(job.plan)
    for name in steps.member_plan:
        plan[name] = list(job.plan[name]) * k
    names = sorted({n for t in trials for n in t.hyperparameters})
    plan["per_member"] = {  # Tuning.space always tunes the learning rate
        "lr": [float(t.settings["lr"]) for t in trials for _ in range(m)],
        "weight_decay": [float(t.settings.get("weight_decay", settings.get("weight_decay", 0.0)))
                         for t in trials for _ in range(m)],
        "hyper": {n: [t.hyperparameters[n] for t in trials for _ in range(m)] for n in names}}
    # a judge's private data with per-member rows repeats them itself
    private = job.private.repeated(k) if hasattr(job.private, "repeated") else job.private
    return replace(job, members=[member for _ in trials for member in job.members],
                   inputs=inputs, plan=plan, private=private)


def tune(suite_name: str, suite_version: str, spec: str, overrides: dict[str, Any],
         variant: str, seeds: list[int], options: dict[str, Any]) -> Tuned:
    """The whole protocol for one (objective, variant), in this process (a worker's call):
    search, choose, final."""
    from harness.contract.registry import suite_at
    from harness.objectives.loading import load_objective
    from harness.runner.inprocess import run_cells

    start = time.monotonic()
    suite = suite_at(suite_name, suite_version)
    objective = load_objective(spec, overrides or None)
    trials = trials_for(suite, objective)
    run = {k: options[k] for k in ("device", "mode", "data_root", "download") if k in options}
    searched = search(suite, objective, variant, trials, **run)
    chosen = choose(suite, searched)
    if chosen is None:
        final = nothing_chosen(variant, seeds)
    else:
        trial = trials[chosen]
        tuned_objective = load_objective(spec, {**overrides, **trial.hyperparameters})
        final = run_cells(suite.tuned(trial.settings), tuned_objective, [variant], seeds,
                          **run)
        for cell in final:
            cell.info = {**cell.info, "tuned": trial.record()}
    return Tuned(variant, trials, searched, chosen, final, time.monotonic() - start)


def _tuning(suite: Suite):
    if suite.tuning is None:
        raise ValueError(f"suite {suite.name!r} has no tuned protocol")
    return suite.tuning
