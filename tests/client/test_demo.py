"""The demo's plan (harness/demo.py): every suite filled with its reference and its key
contrasts on the ranked variants; --full: every baseline on every default variant."""

from __future__ import annotations

from harness import demo
from harness.contract.registry import all_suites
from harness.objectives.loading import load_objective


def test_the_demo_fills_every_suite_with_its_reference_and_contrasts():
    plan = demo.plan()
    # a new suite names its contrasts (mini-MUSE is left to --full: its fixtures' time)
    assert set(plan) == {s.name for s in all_suites()} - {"unlearning-muse"}
    for suite in all_suites():
        if suite.name not in plan:
            continue
        names, variants = plan[suite.name]
        assert names[0] == suite.reference and len(names) >= 2
        fits = [n for n in names if suite.supports(load_objective(n).hooks)]
        # the noise-robust losses also run where they are no baseline, the rest are
        assert fits == names and set(names) - {"gce", "ldr_kl"} <= set(suite.baselines)
        assert variants == suite.ranked_variants  # what the home page's score needs
    classification = [s for s, (names, _) in plan.items() if "gce" in names]
    assert sorted(classification) == ["calibration", "certified", "noisy-labels"]  # one group
    # the fewest seeds with a verdict, a whole chunk where it trains whole anyway
    seeds = {s.name: demo.demo_seeds(s) for s in all_suites()}
    assert seeds["unlearning-tofu"] == 3 and seeds["noisy-labels"] == 5
    full = demo.plan(full=True)
    assert all(full[s.name] == (list(s.baselines), s.default_variants) for s in all_suites())


def test_the_cli_prints_the_home_pages_scores(capsys):
    from harness.terminal import render_scores

    rows = [{"objective": "gce", "rank": 1, "rank_low": 1, "rank_high": 2, "tied": True,
             "score": 0.8512, "score_low": 0.8, "score_high": 0.9,
             "coverage": ["calibration", "noisy-labels"]},
            {"objective": "new[bold]", "rank": None, "score": None, "coverage": []}]
    render_scores({"rows": rows, "rank_method": "the rule"})
    out = capsys.readouterr().out
    assert "=1 of 1 (1–2)" in out and "0.851 [0.800, 0.900]" in out
    assert "Scored on calibration, noisy-labels" in out and "Provisional" in out
    assert "new[bold]" in out  # a user's name is shown as written, not as markup
    assert "Score: the rule." in out
