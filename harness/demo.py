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


def run(*, full: bool = False, seeds: int = 5, workers: int | None = None,
        progress: str | bool = "auto", say: Callable[[str], None] = print) -> dict[str, list]:
    """Train what the demo needs and is not stored yet, every suite under one progress bar;
    per suite, the stored versions. Interrupted, the finished groups stay stored."""
    from harness.api import _Plan, _seed_list, _suite, _train, setup
    from harness.objectives.loading import load_objective

    chosen = plan(full)
    seed_list = _seed_list(seeds)
    plans = [_Plan(_suite(name, None), names, [load_objective(n) for n in names], variants,
                   seed_list) for name, (names, variants) in chosen.items()]
    setup()
    versions = _train(plans, workers=workers, progress=progress, say=say)
    return dict(zip(chosen, versions, strict=True))
