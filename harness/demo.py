"""The demo (``harness demo``, ``make demo``): every suite filled with its reference and the
literature's key contrasts (each suite declares them: ``Suite.contrasts``), so that the
leaderboard shows the product; ``--full`` runs every baseline on every default variant
(the full sweep, ``make full``). mini-MUSE declares none: its 10 language models take 15
minutes to build on 2 cores (once per machine), three times the demo's budget.

The contrasts (../shared/PROTOCOLS.md has the sources): noise-robust losses against CE
under 40–60% label noise; interval-bound training against CE on verified accuracy; focal
loss and temperature scaling against CE on calibration; TENT against LAME, which never
updates the model, on streams whose classes are correlated; gradient ascent against the
losses that also keep the retained data (GradDiff, NPO) on mini-TOFU.
"""

from __future__ import annotations

from collections.abc import Callable


def plan(full: bool = False) -> dict[str, tuple[list[str], list[str]]]:
    """Per suite, the objectives and variants the demo runs: the contrasts on the ranked
    variants, or with ``full`` every baseline on every default variant."""
    from harness.contract.registry import all_suites

    out = {}
    for suite in all_suites():
        if full:
            out[suite.name] = (list(suite.baselines), list(suite.default_variants))
        elif suite.contrasts:
            out[suite.name] = (list(suite.contrasts), list(suite.ranked_variants))
    return out


def demo_seeds(suite) -> int:
    """The demo's seeds on ``suite``: the fewest that give a verdict (``Suite.min_seeds``),
    or a whole member chunk where a chunk is bigger (it trains whole anyway)."""
    return max(suite.min_seeds, suite.chunk)


def run(*, full: bool = False, seeds: int | None = None, workers: int | None = None,
        progress: str | bool = "auto", say: Callable[[str], None] = print) -> dict[str, list]:
    """Train what the demo needs and is not stored yet, every suite under one progress bar;
    per suite, the stored versions. ``seeds``: seeds 0..N-1 on every suite; by default 5 with
    ``full``, else :func:`demo_seeds`. Interrupted, the finished groups stay stored."""
    from harness.api import _Plan, _seed_list, _suite, _train, setup
    from harness.objectives.loading import load_objective

    chosen = plan(full)
    plans = []
    for name, (names, variants) in chosen.items():
        suite = _suite(name, None)
        count = seeds or (5 if full else demo_seeds(suite))
        plans.append(_Plan(suite, names, [load_objective(n) for n in names], variants,
                           _seed_list(count)))
    setup()
    versions = _train(plans, workers=workers, progress=progress, say=say)
    return dict(zip(chosen, versions, strict=True))
