"""Performance profiles and the critical-difference diagram (webapp/leaderboard/ranking.py):
known answers by hand and from Demšar's table, and the suite page that shows them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from webapp.leaderboard.ranking import cliques, critical_difference, performance_profiles

VARIANTS = ["v1", "v2", "v3", "v4"]


def _summary(scores: dict[str, list[float]], ranked: dict[str, bool] | None = None,
             reference: str = "a") -> dict:
    return {"ranked": VARIANTS, "rows": [
        {"objective": k, "is_reference": k == reference,
         "ranked": (ranked or {}).get(k, True), "by_variant": dict(zip(VARIANTS, v,
                                                                        strict=True))}
        for k, v in scores.items()]}


SCORES = {"a": [0.9, 0.5, 0.7, 0.6],   # ranks 1, 3, 2, 3
          "b": [0.8, 0.7, 0.8, 0.7],   # ranks 2, 1, 1, 1
          "c": [0.7, 0.6, 0.4, 0.65]}  # ranks 3, 2, 3, 2


def test_profiles_by_hand():
    p = performance_profiles(_summary(SCORES))
    gaps = {"a": [0.0, 0.2, 0.1, 0.1], "b": [0.1, 0.0, 0.0, 0.0], "c": [0.2, 0.1, 0.4, 0.05]}
    assert p["tau"][0] == 0.0 and p["tau"][-1] == pytest.approx(0.4)  # the largest gap
    for o in p["objectives"]:
        for tau, rho in zip(p["tau"], o["rho"], strict=True):
            assert rho == np.mean([g <= tau + 1e-9 for g in gaps[o["label"]]])
    by = {o["label"]: o for o in p["objectives"]}
    assert by["b"]["rho"][0] == 0.75 and by["b"]["wins"] == 3  # best on three of four
    assert by["a"]["rho"][0] == 0.25 and by["c"]["rho"][0] == 0.0
    assert by["c"]["worst_gap"] == pytest.approx(0.4)
    assert all(o["rho"][-1] == 1.0 for o in p["objectives"])


def test_critical_difference_against_demsar_and_the_friedman_formula():
    cd = critical_difference(_summary(SCORES))
    # Demšar 2006, Table 5(a): q_0.05 = 2.343 for k = 3
    assert cd["cd"] == pytest.approx(2.343 * math.sqrt(3 * 4 / (6 * 4)), abs=1e-3)
    means = {o["label"]: o["mean_rank"] for o in cd["objectives"]}
    assert means == {"a": 2.25, "b": 1.25, "c": 2.5}
    assert [o["label"] for o in cd["objectives"]] == ["b", "a", "c"]
    # Friedman's statistic by its formula (no ties here), its χ² p-value
    n, k = 4, 3
    chi2 = 12 * n / (k * (k + 1)) * sum(r ** 2 for r in means.values()) - 3 * n * (k + 1)
    assert cd["friedman_p"] == pytest.approx(scipy.stats.chi2.sf(chi2, k - 1))
    assert cd["groups"] == [[0, 2]]  # 2.5 − 1.25 < 1.657: none told apart


def test_demsars_cd_for_fifteen_objectives_and_four_variants():
    rng = np.random.default_rng(0)
    scores = {f"o{i:02d}": list(rng.random(4)) for i in range(15)}
    cd = critical_difference(_summary(scores, reference="o00"))
    q = 3.391  # q_0.05 for k = 15 (the studentized range over √2; Demšar's table stops at 10)
    assert cd["cd"] == pytest.approx(q * math.sqrt(15 * 16 / 24), abs=2e-3)  # 10.72 ranks


def test_cliques_are_maximal_runs_narrower_than_the_cd():
    assert cliques([1.0, 1.5, 2.9, 3.2, 6.0], 2.0) == [[0, 2], [1, 3]]  # they overlap
    assert cliques([1.0, 4.0, 7.0], 2.0) == []
    assert cliques([1.0, 1.1, 1.2], 5.0) == [[0, 2]]


def test_only_ranked_objectives_are_compared_and_too_few_give_nothing():
    summary = _summary(SCORES, ranked={"c": False})
    p = performance_profiles(summary)
    assert {o["label"] for o in p["objectives"]} == {"a", "b"}
    cd = critical_difference(summary)
    assert cd["friedman_p"] is None  # Friedman needs three
    assert performance_profiles(_summary({"a": SCORES["a"]})) is None
    assert critical_difference(_summary({"a": SCORES["a"]})) is None


@pytest.mark.django_db
def test_the_suite_page_shows_both_for_ranked_objectives(client):
    from tests.web.test_leaderboard import make_objective

    ranked = ("clean", "sym-0.4", "sym-0.6", "asym-0.4")
    make_objective("ce", {v: [0.90 - 0.1 * i, 0.91 - 0.1 * i, 0.89 - 0.1 * i]
                          for i, v in enumerate(ranked)})
    make_objective("gce", {v: [0.92 - 0.05 * i, 0.91 - 0.05 * i, 0.93 - 0.05 * i]
                           for i, v in enumerate(ranked)})
    make_objective("mae", {v: [0.80, 0.81, 0.79] for v in ranked})
    make_objective("few", {"clean": [0.99]})  # provisional: in neither view
    html = client.get("/suites/noisy-labels/").content.decode()
    from tests.web.test_pages import _json_script

    profiles = _json_script(html, "profiles-data")
    assert [t["name"] for t in profiles["data"]] == ["gce", "mae", "ce"]
    assert "ranked variants (clean, sym-0.4, sym-0.6, asym-0.4)" in html
    cd = _json_script(html, "cd-data")
    assert cd["data"][0]["y"][0] == "gce"  # best mean rank on top
    assert cd["data"][1]["name"] == "critical difference 1.66"
    assert "critical difference at α = 0.05 is <strong>1.66</strong>" in html.replace(
        "Nemenyi's critical difference", "critical difference")
