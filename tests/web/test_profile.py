"""An objective's profile across suites (webapp.leaderboard.crosssuite): known answers on
stored cells (no training), computed independently here with numpy and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client
from scipy import stats as sps

from harness.contract.registry import get_suite
from harness.report import aggregate
from tests.web.test_leaderboard import SUITE, make_objective
from webapp.leaderboard.crosssuite import profile_table

pytestmark = pytest.mark.django_db
RANKED = SUITE.ranked_variants  # clean, sym-0.4, sym-0.6, asym-0.4
SHIFT = {"clean": 0.0, "sym-0.4": -0.2, "sym-0.6": -0.3, "asym-0.4": -0.15}
CE = [0.80, 0.83, 0.78, 0.81, 0.79]
MINE = [0.86, 0.85, 0.87, 0.84, 0.88]
GCE = [0.84, 0.86, 0.83, 0.85, 0.87]


def _accs(base: list[float]) -> dict[str, list[float]]:
    return {v: [a + SHIFT[v] for a in base] for v in RANKED}


def _normalized(base: list[float]) -> np.ndarray:
    anchors = SUITE.headline_anchors
    return np.concatenate([[(a - anchors.worst) / (anchors.best - anchors.worst)
                            for a in accs] for accs in _accs(base).values()])


def test_profile_known_answers_and_the_objective_page():
    make_objective("ce", _accs(CE))
    make_objective("gce", _accs(GCE))
    make_objective("ldr-kl", _accs(GCE))  # stored as ldr_kl (a slug's "-" is the name's "_")
    make_objective("mine", _accs(MINE), builtin=False)
    calibration = get_suite("calibration")
    found = profile_table("mine", suites=[SUITE, calibration])
    noisy, cal = found["suites"]
    assert cal["status"] == "missing" and cal["score"] is None
    assert noisy["status"] == "scored" and noisy["verdict"] == "better"
    # improvement: per seed the mean over variants of mine − ce (the shift cancels)
    diff = np.array(MINE) - np.array(CE)
    assert noisy["improvement"] == pytest.approx(diff.mean())
    half = sps.t.ppf(0.975, 4) * diff.std(ddof=1) / np.sqrt(5)
    assert noisy["improvement_ci_low"] == pytest.approx(diff.mean() - half)
    # resolvable: every objective compared with ce on the page (mine, gce, ldr_kl: m = 3)
    spreads = [diff.std(ddof=1), *[(np.array(GCE) - np.array(CE)).std(ddof=1)] * 2]
    assert noisy["resolvable"]["compared"] == 3
    assert noisy["resolvable"]["difference"] == pytest.approx(
        sps.t.ppf(1 - 0.05 / 6, 4) * np.median(spreads) / np.sqrt(5))
    # score: the IQM over the 20 (variant, seed) normalized scores
    assert noisy["score"] == pytest.approx(sps.trim_mean(_normalized(MINE), 0.25))
    assert noisy["score_low"] < noisy["score"] < noisy["score_high"]
    # rank among the suite's baselines (ce, gce) by the same score and replicates
    expected = aggregate.ranked({
        name: {SUITE.name: dict(zip(RANKED, np.split(_normalized(base), 4), strict=True))}
        for name, base in (("__mine__", MINE), ("gce", GCE), ("ldr_kl", GCE), ("ce", CE))})
    me = next(r for r in expected if r.name == "__mine__")
    assert (noisy["rank"], noisy["rank_low"], noisy["rank_high"], noisy["of"]) == (
        me.rank, me.rank_low, me.rank_high, 4)
    # the aggregate over the one scored suite is its score; calibration is named unscored
    assert found["aggregate"]["score"] == pytest.approx(noisy["score"])
    assert found["aggregate"]["suites"] == [SUITE.name]
    assert found["unscored"] == ["calibration"]
    assert noisy["band"]["clean"]["low"] == pytest.approx(np.mean(CE) / 0.9 - 0.1 / 0.9)
    page = Client().get("/objectives/mine/").content.decode()
    assert 'id="profile"' in page and "▲ better" in page
    assert f"{noisy['score']:.3f}" in page


def test_compare_page_gives_the_suite_pages_verdict_against_the_reference():
    """x beats ce on every seed but one by a hair (paired p ≈ 0.045 alone); among four
    objectives compared with ce, Holm does not resolve it: the suite page says ≈, and so
    must the compare page, whose single uncorrected test would have said "x better"."""
    from webapp import leaderboard

    ce = [0.70, 0.72, 0.69, 0.71, 0.70]
    lift = {"x": [0.01, 0.02, 0.001, 0.015, 0.004], "n1": [0.01, -0.01, 0.005, -0.005, 0.0],
            "n2": [-0.02, 0.01, 0.0, 0.01, -0.004], "n3": [0.0, 0.003, -0.01, 0.01, -0.002]}
    make_objective("ce", {"sym-0.4": ce})
    for name, d in lift.items():
        make_objective(name, {"sym-0.4": [c + e for c, e in zip(ce, d, strict=True)]})
    assert sps.ttest_1samp(lift["x"], 0).pvalue < 0.05
    table = leaderboard.variant_table("noisy-labels", "sym-0.4")
    x = next(r for r in table["rows"] if r["objective"] == "x")
    assert x["vs_reference"]["distinguishable"] is False
    assert all(r["tied_with_best"] == (r["rank_low"] == 1) for r in table["rows"])
    pair = leaderboard.compare("x", "ce", SUITE)
    row = next(r for r in pair["rows"] if r["variant"] == "sym-0.4")
    assert row["diff"]["p_value"] < 0.05 and row["diff"]["distinguishable"] is False
    assert pair["family"] == 4 and pair["overall"]["distinguishable"] is False
    assert leaderboard.compare("x", "n1", SUITE)["family"] == 1  # no reference: one test
    page = Client().get("/objectives/x/compare/?with=ce&suite=noisy-labels").content.decode()
    assert "≈ not resolved" in page and "Holm-corrected over the 4 objectives" in page
    suite_page = Client().get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert 'id="resolvable"' in suite_page and "Holm over 4 objectives" in suite_page


def test_the_score_is_the_same_on_the_page_in_the_api_and_in_the_csv():
    import csv
    import io

    from webapp import leaderboard

    make_objective("ce", _accs(CE))
    make_objective("mine", _accs(MINE), builtin=False)
    board = {r["slug"]: r for r in leaderboard.home_table()["rows"]}
    api = Client().get("/api/scores").json()
    assert {r["slug"]: (r["score"], r["score_low"], r["rank"], r["coverage"])
            for r in api["rows"]} == {s: (r["score"], r["score_low"], r["rank"],
                                          r["coverage"]) for s, r in board.items()}
    assert Client().get("/api/scores?kind=builtin").json()["rows"][0]["slug"] == "ce"
    bad = Client().get("/api/scores?kind=mine")
    assert bad.status_code == 400 and "kind is one of" in bad.json()["error"]
    rows = list(csv.DictReader(io.StringIO(Client().get("/export/scores.csv").content.decode())))
    mine = next(r for r in rows if r["slug"] == "mine")
    assert float(mine["score"]) == pytest.approx(board["mine"]["score"])
    assert mine["rank"] == "1" and mine["scored_on"] == "noisy-labels"
    assert float(mine["normalized_noisy-labels"]) == pytest.approx(
        board["mine"]["cells"]["noisy-labels"]["normalized"])
    assert profile_table("mine")["aggregate"]["score"] == pytest.approx(board["mine"]["score"])
