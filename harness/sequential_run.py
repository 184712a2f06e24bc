"""``harness run suite NAME --sequential`` (``api.run(..., sequential=CAP)``): seeds spent
where a verdict is undecided, by a rule fixed before any seed runs
(:mod:`harness.report.sequential`).

Every objective starts with one member chunk of seeds (the suite's ``chunk``, 5); after
each look, the (objective, variant) pairs whose paired comparison with the reference is
still undecided get the next chunk, up to ``CAP`` seeds; the reference trains whatever
seeds an undecided pair needs. Each look's boundary is O'Brien–Fleming's, spending
α = 0.05 split over the objectives compared (Bonferroni), so a "better" verdict keeps its
nominal error rate however many looks were taken, for normally distributed per-seed
differences (simulated: bench/README.md, where strongly skewed or sometimes-diverging
seeds go above it, in a fixed design too). ``--force`` retrains the first look's seeds
only. Every cell
a look trained stays stored and is shown: the tables afterwards are the ordinary ones, over
the seeds each pair ended with.
"""

from __future__ import annotations

import math
from typing import Any

from harness.contract.suite import Suite


def train_sequential(suite: Suite, specs: list[str], loaded: list[Any], variants: list[str],
                     cap: int, asked: dict[str, Any]) -> Any:
    """Run the design to its end; the results with ``.sequential`` (each pair's looks)."""
    from harness.api import HarnessError, Results, _Plan, _train
    from harness.report.sequential import Design, decide

    say = asked["say"]
    if asked["factorial"] is not None or asked["tuned"]:
        raise HarnessError("--sequential chooses the seeds itself: drop "
                           + ("--factorial" if asked["factorial"] is not None else "--tuned"))
    try:
        design = Design(start=suite.chunk, step=suite.chunk, cap=cap)
    except ValueError as exc:
        raise HarnessError(f"sequential: {exc} (looks come a member chunk of "
                           f"{suite.chunk} seeds at a time)") from None
    ref = next(i for i, o in enumerate(loaded) if o.name == suite.reference)
    others = [i for i in range(len(loaded)) if i != ref]
    if not others:
        raise HarnessError("sequential: give at least one objective besides the reference")
    pending = {(i, v) for i in others for v in variants}
    looks: dict[tuple[int, str], list[dict[str, Any]]] = {p: [] for p in pending}
    n, versions, first = design.start, None, True
    while pending:
        # one plan per objective, over its own undecided variants only (a decided pair
        # trains no more seeds); the reference over every variant still undecided
        wanted = {i: sorted(v for j, v in pending if j == i) for i, _ in pending}
        wanted[ref] = sorted({v for _, v in pending})
        chosen = sorted(wanted)
        plans = [_Plan(suite, [specs[i]], [loaded[i]], wanted[i], list(range(n)))
                 for i in chosen]
        say(f"sequential look at {n} seeds: {len(pending)} undecided "
            f"pair{'s' * (len(pending) > 1)}")
        stored = _train(plans, device=asked["device"], mode=asked["mode"],
                        sandbox=asked["sandbox"], force=asked["force"] and first,
                        workers=asked["workers"], data_root=asked["data_root"],
                        download=asked["download"], progress=asked["progress"], say=say)
        by_index = {i: found[0] for i, found in zip(chosen, stored, strict=True)}
        first = False
        if versions is None:
            versions = [by_index.get(i) for i in range(len(loaded))]
        for i, v in sorted(pending):
            diffs = _paired(suite, by_index[i], by_index[ref], v, n)
            if diffs is None:  # a seed failed or diverged: the rule cannot look
                looks[(i, v)].append({"n": n, "verdict": "no verdict: a seed did not finish"})
                pending.discard((i, v))
                continue
            d = decide(diffs, design, comparisons=len(others))
            looks[(i, v)].append({"n": n, "verdict": d.verdict, "p": d.p_value,
                                  "threshold": d.threshold})
            if d.next_n is None:
                pending.discard((i, v))
        if pending:
            n = design.start + design.step * ((n - design.start) // design.step + 1)
    results = Results(suite, versions, variants)
    results.sequential = {
        "design": {"start": design.start, "step": design.step, "cap": design.cap,
                   "alpha": design.alpha, "comparisons": len(others)},
        "pairs": [{"objective": loaded[i].label, "variant": v, "looks": looks[(i, v)],
                   "seeds": looks[(i, v)][-1]["n"], "verdict": looks[(i, v)][-1]["verdict"]}
                  for i, v in sorted(looks)]}
    return results


def _paired(suite: Suite, version: Any, reference: Any, variant: str, n: int
            ) -> list[float] | None:
    """Per seed 0 … n−1, the objective's headline improvement over the reference's (positive
    = better), or None when a seed of either is missing or not ok."""
    from harness.storage.models import Cell, Metric

    values: dict[tuple[int, int], float] = {}
    ok = Cell.objects.filter(version__in=[version, reference], suite=suite.name,
                             suite_version=suite.version, variant=variant, seed__lt=n,
                             status=Cell.OK)
    for version_id, seed, value in Metric.objects.filter(
            cell__in=ok, name=suite.headline).values_list(
            "cell__version_id", "cell__seed", "value"):
        values[(version_id, seed)] = value
    head = suite.headline_metric
    out = []
    for s in range(n):
        a, b = values.get((version.id, s)), values.get((reference.id, s))
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            return None
        out.append(head.improvement(a, b))
    return out
