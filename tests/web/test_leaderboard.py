"""Over 500 lines on purpose: 29 known answers on one stored board (``board``).

webapp.leaderboard: known answers, fixed-anchor scores, the table cache, query counts.

Cells are stored with store.store_results (no training); every expected number is
computed independently here with harness.report.stats on the same per-seed values.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from scipy import stats as sps

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.report import stats
from harness.storage import store
from harness.storage.models import Cell, Objective, ObjectiveVersion, TableCache
from webapp import exports, leaderboard
from webapp.leaderboard import cache

pytestmark = pytest.mark.django_db
SUITE = get_suite("noisy-labels")
ENV = {"python": "3.11", "device": "cpu"}
DEFAULTS = SUITE.default_variants  # clean, sym-0.2, sym-0.4, sym-0.6, asym-0.2, asym-0.4, idn-0.4
CE = {"clean": [0.97, 0.96, 0.98, 0.97], "sym-0.4": [0.70, 0.72, 0.69, 0.71]}
GCE = {"clean": [0.96, 0.97, 0.97, 0.96], "sym-0.4": [0.90, 0.93, 0.91, 0.92]}
MAE = {"clean": [0.90, 0.91, 0.89, 0.90], "sym-0.4": [0.71, 0.70, 0.73, 0.69]}


def make_objective(slug: str, accs: dict[str, list[float]], *, builtin: bool = True,
                   owner=None, visibility: str = "public", code: str | None = None,
                   hp: dict | None = None, label: str | None = None,
                   diverged: dict[str, list[int]] | None = None,
                   curves: bool = False) -> ObjectiveVersion:
    """An objective version with stored cells: ``accs[variant][seed]`` is test_acc."""
    obj, _ = Objective.objects.get_or_create(
        slug=slug, defaults={"name": slug.replace("-", "_"), "is_builtin": builtin,
                             "owner": owner, "visibility": visibility,
                             "description": f"The {slug} objective."})
    code = code or f"def classification_loss(logits, targets):\n    return {slug!r}\n"
    hp = hp or {}
    sha = hashlib.sha256(code.encode()).hexdigest()
    version = ObjectiveVersion.objects.create(
        objective=obj, code=code, code_sha256=sha, hyperparameters=hp,
        key=hashlib.sha256(f"{sha}{sorted(hp.items())}".encode()).hexdigest(),
        label=label or obj.name)
    results = []
    for variant, values in accs.items():
        for seed, acc in enumerate(values):
            metrics = {"test_acc": acc, "best_test_acc": acc + 0.01, "noise_rate": 0.4}
            curve = {"test_acc": [acc / 2, acc * 0.9, acc], "train_loss": [2.0, 1.0, 0.5 + seed]}
            results.append(CellResult(variant, seed, "ok", metrics, curve if curves else {}))
    for variant, seeds in (diverged or {}).items():
        for seed in seeds:
            results.append(CellResult(variant, seed, "diverged", {"noise_rate": 0.4},
                                      {"train_loss": [2.0, None]} if curves else {},
                                      diverged_step=3))
    store.store_results(version, SUITE, results, ENV)
    return version


@pytest.fixture
def board():
    return {"ce": make_objective("ce", CE), "gce": make_objective("gce", GCE),
            "mae": make_objective("mae", MAE)}


def _row(table: dict, label: str) -> dict:
    return next(r for r in table["rows"] if r["objective"] == label)


# --- variant tables ---------------------------------------------------------------------

def test_variant_table_known_answers(board):
    table = leaderboard.variant_table(SUITE, "sym-0.4")
    assert table["suite"] == "noisy-labels" and table["suite_version"] == SUITE.version
    assert table["headline"] == "test_acc" and table["reference"] == "ce"
    assert table["metrics"][0] == "test_acc" and "best_test_acc" in table["metrics"]
    assert [r["objective"] for r in table["rows"]] == ["gce", "mae", "ce"]  # best first
    gce, ce = _row(table, "gce"), _row(table, "ce")
    expected = stats.summarize(GCE["sym-0.4"])
    assert gce["mean"] == pytest.approx(np.mean(GCE["sym-0.4"]))
    assert (gce["ci_low"], gce["ci_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
    assert gce["std"] == pytest.approx(expected.std) and gce["iqm"] == pytest.approx(expected.iqm)
    assert gce["values"] == {str(s): v for s, v in enumerate(GCE["sym-0.4"])}
    assert gce["secondary"]["best_test_acc"] == pytest.approx(np.mean(GCE["sym-0.4"]) + 0.01)
    cmp = stats.compare_paired(GCE["sym-0.4"], CE["sym-0.4"])
    vs = gce["vs_reference"]
    assert vs["prob_improvement"] == pytest.approx(cmp.prob_improvement) == 1.0
    assert vs["mean_diff"] == pytest.approx(cmp.mean_diff)
    assert (vs["diff_ci_low"], vs["diff_ci_high"]) == pytest.approx(
        (cmp.diff_ci_low, cmp.diff_ci_high))
    assert vs["distinguishable"] is True
    assert ce["is_reference"] and ce["vs_reference"] is None
    assert gce["slug"] == "gce" and gce["is_builtin"] and gce["version_id"] == board["gce"].pk
    # MAE vs CE on sym-0.4: overlapping seeds, not distinguishable; only gce is the best.
    mae = _row(table, "mae")
    assert mae["vs_reference"]["distinguishable"] is False
    assert [r["objective"] for r in table["rows"] if r["tied_with_best"]] == ["gce"]


def test_ties_with_the_best_and_nan_becomes_null(board):
    make_objective("twin", {"sym-0.4": [0.90, 0.92, 0.89, 0.93]})
    make_objective("single", {"sym-0.4": [0.5]})
    table = leaderboard.variant_table("noisy-labels", "sym-0.4")
    tied = {r["objective"] for r in table["rows"] if r["tied_with_best"]}
    assert tied == {"gce", "twin"}
    single = _row(table, "single")
    assert single["std"] is None and single["ci_low"] is None and single["seeds"] == 1
    assert single["vs_reference"] is None  # needs two paired seeds


def test_diverged_seeds_are_counted_not_averaged():
    make_objective("ce", CE)
    make_objective("wild", {"sym-0.4": [0.8, 0.82]}, diverged={"sym-0.4": [2, 3]})
    row = _row(leaderboard.variant_table(SUITE, "sym-0.4"), "wild")
    assert row["seeds"] == 2 and row["diverged"] == 2
    assert row["mean"] == pytest.approx(0.81)


def test_an_objective_whose_cells_all_failed_is_on_no_public_table(board):
    """Killed by the sandbox everywhere: no "0/7 variants" row, no rank, no "--" export
    row (the owner reads why on the run page)."""
    killed = make_objective("killed", {}, builtin=False)
    store.store_results(killed, SUITE, [
        CellResult(v, s, "killed", error="violation", reason="violation")
        for v in ("clean", "sym-0.4") for s in range(2)], ENV)
    assert "killed" not in [r["objective"] for r in
                            leaderboard.variant_table(SUITE, "sym-0.4")["rows"]]
    assert "killed" not in [r["objective"] for r in leaderboard.suite_summary(SUITE)["rows"]]
    assert "killed" not in [r["objective"] for r in leaderboard.home_table()["rows"]]
    # one seed that trained brings it back, failures counted beside it
    store.store_results(killed, SUITE, [CellResult("clean", 5, "ok", {"test_acc": 0.5,
                                                                          "noise_rate": 0.0})],
                          ENV)
    row = _row(leaderboard.variant_table(SUITE, "clean"), "killed")
    assert (row["seeds"], row["failed"]) == (1, 2)


def test_newest_version_per_label_and_labels_that_collide():
    make_objective("ce", CE)
    make_objective("gce", {"sym-0.4": [0.5, 0.5, 0.5, 0.5]}, code="old = 1\n")
    new = make_objective("gce", GCE, code="new = 2\n")
    other = make_objective("gce-2", GCE, label="gce", builtin=False)
    table = leaderboard.variant_table(SUITE, "sym-0.4")
    ids = {r["version_id"] for r in table["rows"]}
    assert new.pk in ids and other.pk in ids and len(ids) == 3
    labels = [r["objective"] for r in table["rows"] if r["slug"].startswith("gce")]
    assert len(set(labels)) == 2 and all(x.startswith("gce@") for x in labels)


# --- suite summary, normalized scores, home ---------------------------------------------

def test_suite_summary_relative_to_reference_with_paired_ci(board):
    summary = leaderboard.suite_summary("noisy-labels")
    gce = _row(summary, "gce")
    per_seed = [np.mean([GCE[v][s] - CE[v][s] for v in ("clean", "sym-0.4")]) for s in range(4)]
    expected = stats.summarize(per_seed)
    assert gce["improvement"] == pytest.approx(expected.mean)
    assert (gce["improvement_ci_low"], gce["improvement_ci_high"]) == pytest.approx(
        (expected.ci_low, expected.ci_high))
    assert gce["improvement_seeds"] == 4 and gce["improvement_variants"] == 2
    assert gce["distinguishable"] and gce["improvement"] > 0
    assert gce["variants_covered"] == 2 and gce["variants_total"] == len(DEFAULTS)
    assert not gce["complete"]
    lo, hi = SUITE.headline_anchors.worst, SUITE.headline_anchors.best
    assert (lo, hi) == (0.1, 1.0) and summary["anchors"] == [0.1, 1.0]
    by_variant = {v: (np.mean(GCE[v]) - lo) / (hi - lo) for v in GCE}
    assert gce["by_variant"] == pytest.approx(by_variant)
    assert gce["normalized"] == pytest.approx(np.mean(list(by_variant.values())))
    ce = _row(summary, "ce")
    assert ce["is_reference"] and ce["improvement"] == 0
    mae = _row(summary, "mae")
    assert mae["improvement"] < 0 or not mae["distinguishable"]


def test_summary_worst_variant_is_the_lowest_mean_when_higher_is_better(board):
    make_objective("wild", {}, diverged={"sym-0.4": [0, 1]})  # nothing covered
    summary = leaderboard.suite_summary(SUITE)
    gce = _row(summary, "gce")
    means = {v: np.mean(GCE[v]) for v in ("clean", "sym-0.4")}
    assert gce["variant_means"] == pytest.approx(means)
    assert gce["mean"] == pytest.approx(np.mean(list(means.values())))
    assert gce["worst_variant"] == "sym-0.4"  # 91.5 < 96.5
    assert gce["worst"] == pytest.approx(means["sym-0.4"])
    wild = _row(summary, "wild")
    assert wild["variant_means"] == {} and wild["worst"] is None
    assert wild["worst_variant"] is None and wild["mean"] is None


# The fake suite (tests/fake_suite): lower-is-better RMSE; values are (rmse, mae) per seed.
FAKE_MSE = {"clean": [(0.50, 0.40), (0.70, 0.50)], "out-0.2": [(1.00, 0.80), (1.20, 0.90)],
            "out-0.4": [(0.90, 0.70), (0.90, 0.60)]}
FAKE_HUBER = {"clean": [(0.40, 0.30), (0.60, 0.40)], "out-0.2": [(0.70, 0.50), (0.90, 0.60)],
              "out-0.4": [(0.80, 0.50), (0.95, 0.70)]}


def make_fake(suite, slug: str, values: dict[str, list[tuple[float, float]]],
              **kwargs) -> ObjectiveVersion:
    """An objective version with fake-suite cells: ``values[variant][seed] = (rmse, mae)``."""
    version = make_objective(slug, {}, **kwargs)
    store.store_results(version, suite, [
        CellResult(variant, seed, "ok", {"rmse": rmse, "mae": mae, "sign_acc": 0.5,
                                         "bias": 0.0})
        for variant, pairs in values.items() for seed, (rmse, mae) in enumerate(pairs)], ENV)
    return version


def with_fake_suite(monkeypatch):
    """The fake suite registered, as HARNESS_SUITES does for a plugin, with mse and huber."""
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")
    from harness.contract import registry
    suite = registry.get_suite("fake-regression")
    make_fake(suite, "mse", FAKE_MSE)
    make_fake(suite, "huber", FAKE_HUBER)
    return suite


@pytest.fixture
def fake_suite(monkeypatch):
    return with_fake_suite(monkeypatch)


def test_summary_worst_variant_is_the_highest_mean_when_lower_is_better(fake_suite):
    summary = leaderboard.suite_summary(fake_suite)
    for label, values in (("mse", FAKE_MSE), ("huber", FAKE_HUBER)):
        row = _row(summary, label)
        means = {v: np.mean([p[0] for p in pairs]) for v, pairs in values.items()}
        assert row["variant_means"] == pytest.approx(means)
        worst = max(means, key=means.get)
        assert row["worst_variant"] == worst and row["worst"] == pytest.approx(means[worst])
    assert _row(summary, "mse")["worst_variant"] == "out-0.2"  # 1.1 > 0.9 > 0.6
    assert _row(summary, "huber")["worst_variant"] == "out-0.4"  # 0.875 > 0.8 > 0.5


def test_heatmap_payload_is_the_mean_of_each_metric_in_table_order(fake_suite):
    page = leaderboard.suite_page(fake_suite, "out-0.2")
    heat = page["heatmap"]
    assert heat["label"] == "test errors" and heat["variant"] == "out-0.2"
    assert heat["columns"] == ["RMSE", "MAE"] and heat["spec"]["better"] == "lower"
    assert heat["objectives"] == ["huber", "mse"]  # the table's order: lowest RMSE first
    assert np.allclose(heat["z"], [[0.8, 0.55], [1.1, 0.85]])
    assert leaderboard.suite_page(SUITE, "sym-0.4")["heatmap"] is None  # none declared


def test_across_rows_sort_complete_first_and_respect_the_filters(board):
    make_objective("full", {v: [0.5, 0.52] for v in DEFAULTS}, builtin=False)
    page = leaderboard.suite_page(SUITE, "sym-0.4")
    across = page["across"]
    assert across["variants"] == DEFAULTS
    assert [r["objective"] for r in across["rows"]] == ["full", "gce", "ce", "mae"]
    gce = across["rows"][1]
    cells = {c["variant"]: c for c in gce["cells"]}
    assert cells["sym-0.4"]["worst"] and not cells["clean"]["worst"]
    assert cells["sym-0.4"]["mean"] == pytest.approx(np.mean(GCE["sym-0.4"]))
    assert cells["sym-0.2"]["mean"] is None and (gce["variants_covered"], gce["variants_total"]) \
        == (2, len(DEFAULTS))
    submitted = leaderboard.suite_page(SUITE, "sym-0.4", kind="submitted")["across"]
    assert [r["objective"] for r in submitted["rows"]] == ["full", "ce"]  # + the reference


def test_heatmap_declaration_is_checked():
    from dataclasses import replace

    from harness.contract.suite import HeatmapSpec, MetricSpec, SuiteError

    extra = (MetricSpec("err", "error", better="lower", unit="percent"),
             MetricSpec("loss", "loss", better="lower"))
    base = replace(SUITE, metrics=(*SUITE.metrics, *extra))
    ok = replace(base, heatmap=HeatmapSpec(("memorization", "err"), "errors", "sym-0.4"))
    assert ok.heatmap.variant == "sym-0.4"
    for spec, words in (
            (HeatmapSpec(("test_acc", "nope"), "x"), "undeclared metric 'nope'"),
            (HeatmapSpec((), "x"), "distinct metrics"),
            (HeatmapSpec(("test_acc", "test_acc"), "x"), "distinct metrics"),
            (HeatmapSpec(("test_acc", "memorization"), "x"), "one direction"),
            (HeatmapSpec(("noise_rate",), "x"), "one direction"),
            (HeatmapSpec(("memorization", "loss"), "x"), "one unit"),
            (HeatmapSpec(("test_acc",), "x", variant="nope"), "undeclared variant 'nope'")):
        with pytest.raises(SuiteError, match=words):
            replace(base, heatmap=spec)


def test_table_columns_are_declared_metrics():
    from dataclasses import replace

    from harness.contract.suite import SuiteError, Track

    assert SUITE.table_columns == tuple(m.name for m in SUITE.metrics
                                        if m.name != SUITE.headline)
    assert replace(SUITE, columns=("noise_rate",)).table_columns == ("noise_rate",)
    for columns, words in ((("nope",), "'nope' is not a declared metric"),
                           (("test_acc",), "other than the headline"),
                           (("noise_rate", "noise_rate"), "columns repeat")):
        with pytest.raises(SuiteError, match=words):
            replace(SUITE, columns=columns)
    track = Track("all", "all", ("classification_loss",), ("noise_rate",))
    with pytest.raises(SuiteError, match="per track"):
        replace(SUITE, columns=("noise_rate",), tracks=(track,))


def test_rank_needs_the_minimum_of_seeds_on_each_ranked_variant_only():
    """The demo's 4 variants × 5 seeds rank an objective; 2 seeds, or a ranked variant
    missing, leave it provisional; variants outside the ranked set do not count."""
    ranked = SUITE.ranked_variants
    assert ranked == ["clean", "sym-0.4", "sym-0.6", "asym-0.4"]
    make_objective("ce", {v: [0.8] * 5 for v in ranked})
    make_objective("demo", {v: [0.9, 0.91, 0.92, 0.9, 0.9] for v in ranked}, builtin=False)
    make_objective("twoseeds", {v: [0.99, 0.99] for v in ranked}, builtin=False)
    make_objective("missing", {v: [0.95] * 5 for v in ranked[:3]}, builtin=False)
    make_objective("more", {**{v: [0.85] * 3 for v in ranked}, "sym-0.2": [0.1] * 3},
                   builtin=False)
    rows = {r["objective"]: r for r in leaderboard.home_table()["rows"]}
    assert rows["demo"]["rank"] == 1 and rows["more"]["rank"] == 2 and rows["ce"]["rank"] == 3
    # the unlearning suites list their reference ("target", stored here on noisy-labels
    # only) without a result: they get no column, only suites with results do
    make_objective("target", {"clean": [0.5] * 3})
    assert [x["suite"] for x in leaderboard.home_table()["suites"]] == ["noisy-labels"]
    assert rows["twoseeds"]["rank"] is None and rows["missing"]["rank"] is None
    assert rows["more"]["score"] == pytest.approx(0.75 / 0.9)  # sym-0.2 is not in it
    assert (rows["demo"]["rank_low"], rows["demo"]["rank_high"]) == (1, 1)
    assert not rows["demo"]["tied"] and not rows["more"]["tied"]
    summary = {r["objective"]: r for r in leaderboard.suite_summary(SUITE)["rows"]}
    assert summary["demo"]["ranked"] and not summary["twoseeds"]["ranked"]


def test_objectives_the_seeds_cannot_separate_are_marked_tied():
    ranked = SUITE.ranked_variants
    make_objective("ce", {v: [0.8] * 5 for v in ranked})
    make_objective("a", {v: [0.9, 0.95, 0.85, 0.92, 0.88] for v in ranked}, builtin=False)
    make_objective("b", {v: [0.88, 0.91, 0.86, 0.95, 0.9] for v in ranked}, builtin=False)
    rows = {r["objective"]: r for r in leaderboard.home_table()["rows"]}
    assert rows["a"]["tied"] and rows["b"]["tied"] and not rows["ce"]["tied"]
    assert rows["ce"]["rank"] == 3 and rows["b"]["rank_high"] >= 2
    from django.test import Client

    page = Client().get("/").content.decode()
    assert "=1" in page and "=2" in page


def test_ranked_variants_must_be_default_variants():
    from dataclasses import replace

    from harness.contract.suite import SuiteError

    with pytest.raises(SuiteError, match="ranked variants must be distinct default"):
        replace(SUITE, ranked=("clean", "mnist/sym-0.4"))
    with pytest.raises(SuiteError, match="ranked variants must be distinct default"):
        replace(SUITE, ranked=("clean", "clean"))


def test_adding_a_submission_changes_nobody_elses_numbers(board):
    before = leaderboard.suite_summary(SUITE)
    home_before = leaderboard.home_table()
    make_objective("better", {v: [0.99] * 4 for v in ("clean", "sym-0.4")}, builtin=False)
    after = leaderboard.suite_summary(SUITE)
    for label in ("ce", "gce", "mae"):
        assert _row(after, label) == _row(before, label)
    scores = {r["objective"]: r["score"] for r in leaderboard.home_table()["rows"]}
    for r in home_before["rows"]:
        assert scores[r["objective"]] == r["score"]


def test_home_table_rank_filters_and_baselines():
    full = {v: [0.9, 0.91, 0.92] for v in DEFAULTS}
    make_objective("ce", {v: [0.8, 0.81, 0.82] for v in DEFAULTS})
    make_objective("mine", full, builtin=False)
    make_objective("partial", {"clean": [0.99, 0.99, 0.99]}, builtin=False)
    home = leaderboard.home_table()
    assert [s["suite"] for s in home["suites"]][0] == "noisy-labels"
    rows = {r["objective"]: r for r in home["rows"]}
    assert rows["mine"]["rank"] == 1 and rows["ce"]["rank"] == 2
    assert rows["partial"]["rank"] is None and rows["partial"]["score"] is None  # incomplete
    # the score: the IQM over every seed of the suite's ranked set alone (the same set for
    # every objective), with a bootstrap interval around it
    expected = sps.trim_mean([(x - 0.1) / 0.9 for v in SUITE.ranked_variants for x in full[v]],
                             0.25)
    assert rows["mine"]["score"] == pytest.approx(expected)
    assert rows["mine"]["score_low"] < expected < rows["mine"]["score_high"]
    assert rows["mine"]["coverage"] == ["noisy-labels"] and rows["partial"]["coverage"] == []
    assert rows["ce"]["is_builtin"] and not rows["mine"]["is_builtin"]
    cell = rows["mine"]["cells"]["noisy-labels"]
    assert cell["improvement"] == pytest.approx(0.1) and cell["distinguishable"]
    submitted = leaderboard.home_table(kind="submitted")
    assert {r["objective"] for r in submitted["rows"]} == {"mine", "partial"}
    assert next(r for r in submitted["rows"] if r["objective"] == "mine")["rank"] == 1
    assert {r["objective"] for r in leaderboard.home_table(kind="builtin")["rows"]} == {"ce"}
    assert leaderboard.home_table(suite="noisy-labels")["suite"] == "noisy-labels"
    with pytest.raises(leaderboard.NotFound):
        leaderboard.home_table(suite="nope")
    with pytest.raises(leaderboard.NotFound):
        leaderboard.home_table(kind="everything")


def test_variant_axis_groups_families_with_the_clean_point():
    axis = leaderboard.variant_axis(SUITE)
    assert axis["x_key"] == "rate" and axis["x_label"] == "noise rate"
    families = {f["name"]: f for f in axis["families"]}
    assert families["digits/symmetric"]["variants"] == ["clean", "sym-0.2", "sym-0.4",
                                                         "sym-0.6"]
    assert families["digits/symmetric"]["x"] == [0.0, 0.2, 0.4, 0.6]
    assert families["digits/asymmetric"]["variants"] == ["clean", "asym-0.2", "asym-0.4"]
    assert "cifar10/cifar10n" not in families  # string rates are not an axis


def test_family_series_and_shaping_helpers(board):
    series = leaderboard.family_series(SUITE)
    gce = series["series"]["gce"]["points"]
    table = leaderboard.variant_table(SUITE, "sym-0.4")
    row = _row(table, "gce")
    assert gce["sym-0.4"] == [row["mean"], row["ci_low"], row["ci_high"]]
    plot = leaderboard.family_plot(series, ["gce", "ce"], metric="acc",
                                   spec=SUITE.headline_metric.to_json())
    sym = next(f for f in plot["families"] if f["name"] == "digits/symmetric")
    line = next(x for x in sym["lines"] if x["label"] == "gce")
    # the family's every x; the variants gce did not run are gaps, never joined
    assert line["x"] == [0.0, 0.2, 0.4, 0.6] and line["mean"][2] == pytest.approx(row["mean"])
    assert line["mean"][1] is None and line["mean"][3] is None and line["low"][1] is None
    rows = leaderboard.visible_rows(table["rows"], limit=1)
    assert [r["objective"] for r in rows] == ["gce", "ce"]  # the reference always stays
    assert [r["objective"] for r in leaderboard.visible_rows(table["rows"],
                                                             kind="submitted")] == ["ce"]
    strip = leaderboard.strip_plot(table, rows)
    assert strip["objectives"][0]["values"] == GCE["sym-0.4"]


# --- objective profiles and compare -----------------------------------------------------

def test_objective_profile_code_visibility_and_curves():
    alice = User.objects.create_user("alice", password="pw-alice-1")
    bob = User.objects.create_user("bob", password="pw-bob-1")
    make_objective("ce", CE, curves=True)
    make_objective("secret", GCE, builtin=False, owner=alice, visibility="private",
                   code="SECRET_MARKER = 1\n", hp={"q": 0.7}, curves=True)
    for viewer in (None, bob):
        p = leaderboard.objective_profile("secret", viewer)
        assert p["code"] is None and not p["code_visible"]
    mine = leaderboard.objective_profile("secret", alice)
    assert "SECRET_MARKER" in mine["code"] and mine["viewer_is_owner"]
    assert mine["owner"] == "alice" and mine["versions"][0]["hyperparameters"] == {"q": 0.7}
    suite = mine["suites"][0]
    assert suite["suite"] == "noisy-labels" and suite["variants"] == ["clean", "sym-0.4"]
    rows = {r["variant"]: r for r in suite["rows"]}
    assert rows["sym-0.4"]["mean"] == pytest.approx(np.mean(GCE["sym-0.4"]))
    assert rows["sym-0.4"]["rank"] == 1 and rows["sym-0.4"]["of"] == 2
    assert suite["summary"][0]["slug"] == "secret"
    curves = suite["curves"]["sym-0.4"]["by_label"]
    own = curves["secret"]["curves"]["train_loss"]
    assert own["mean"] == pytest.approx([2.0, 1.0, 0.5 + np.mean(range(4))])
    sd = np.std([0.5 + s for s in range(4)], ddof=1)
    assert own["high"][2] - own["mean"][2] == pytest.approx(sd, rel=1e-5)
    assert own["seeds"]["3"] == [2.0, 1.0, 3.5]
    assert curves["ce"]["is_reference"] and "seeds" not in curves["ce"]["curves"]["test_acc"]
    one = leaderboard.objective_profile("secret", alice, curves={"noisy-labels": "clean"})
    assert list(one["suites"][0]["curves"]) == ["clean"]
    with pytest.raises(leaderboard.NotFound):
        leaderboard.objective_profile("nope", None)


def test_profile_rows_equal_the_full_variant_tables(board):
    make_objective("twin", {"sym-0.4": [0.90, 0.92, 0.89, 0.93]})
    make_objective("low", {"clean": [0.5, 0.6], "sym-0.4": [0.2, 0.3]}, builtin=False)
    for slug in ("mae", "twin", "low", "ce"):
        suite = leaderboard.objective_profile(slug, None, curves=None)["suites"][0]
        assert suite["rows"]
        for row in suite["rows"]:
            table = leaderboard.variant_table(SUITE, row["variant"])
            full = next(r for r in table["rows"] if r["slug"] == slug)
            assert {k: row[k] for k in full} == full
            assert row["rank"] == table["rows"].index(full) + 1
            assert row["of"] == len(table["rows"])


def test_curves_skip_nan_steps_of_diverged_seeds():
    make_objective("ce", CE)
    make_objective("wild", {"sym-0.4": [0.8, 0.82]}, diverged={"sym-0.4": [2]}, curves=True)
    p = leaderboard.objective_profile("wild", None)
    entry = p["suites"][0]["curves"]["sym-0.4"]["by_label"]["wild"]
    assert entry["diverged"] == [2]
    loss = entry["curves"]["train_loss"]
    assert loss["n"] == [3, 2, 2] and loss["seeds"]["2"] == [2.0, None]


def test_compare_is_paired_by_seed(board):
    c = leaderboard.compare("gce", "mae", "noisy-labels")
    row = next(r for r in c["rows"] if r["variant"] == "sym-0.4")
    expected = stats.compare_paired(GCE["sym-0.4"], MAE["sym-0.4"])
    assert row["diff"]["mean_diff"] == pytest.approx(expected.mean_diff)
    assert row["diff"]["diff_ci_low"] == pytest.approx(expected.diff_ci_low)
    assert row["diff"]["prob_improvement"] == pytest.approx(expected.prob_improvement)
    assert row["n_pairs"] == 4 and row["a"]["mean"] == pytest.approx(np.mean(GCE["sym-0.4"]))
    assert c["a"]["slug"] == "gce" and c["b"]["slug"] == "mae"
    assert c["overall"]["variants"] == ["clean", "sym-0.4"]
    for bad in (("gce", "gce"), ("gce", "nope"), ("nope", "gce")):
        with pytest.raises(leaderboard.NotFound):
            leaderboard.compare(*bad, "noisy-labels")
    with pytest.raises(leaderboard.NotFound):
        leaderboard.compare("gce", "mae", "nope")


# --- exports ----------------------------------------------------------------------------

def test_csv_export_parses_back(board):
    _, tables = leaderboard.export_tables("noisy-labels", "sym-0.4")
    rows = list(csv.DictReader(io.StringIO(exports.tables_csv(tables))))
    assert [r["objective"] for r in rows] == ["gce", "mae", "ce"]
    assert float(rows[0]["mean"]) == pytest.approx(np.mean(GCE["sym-0.4"]))
    assert rows[0]["distinguishable"] == "true" and rows[2]["reference"] == "true"
    assert rows[2]["p_improvement"] == ""  # no comparison of the reference with itself
    _, every = leaderboard.export_tables("noisy-labels")
    assert [t["variant"] for t in every] == ["clean", "sym-0.4"]
    wide = list(csv.DictReader(io.StringIO(exports.tables_csv(every))))
    assert len(wide) == 6
    gce = [r for r in wide if r["objective"] == "gce"]
    summary = _row(leaderboard.suite_summary("noisy-labels"), "gce")
    for r in gce:  # the suite summary's numbers across variants, on each of its lines
        assert float(r["across_mean"]) == pytest.approx(summary["mean"])
        assert float(r["across_worst"]) == pytest.approx(summary["worst"])
        assert r["across_worst_variant"] == "sym-0.4" and r["across_variants"] == "2"
    assert "across_mean" not in rows[0]  # one variant: nothing across


def test_latex_export_is_booktabs_with_best_bold_ties_and_escaping():
    make_objective("ce", CE)
    make_objective("my-loss", GCE, label="my_loss&co")
    make_objective("twin", {"sym-0.4": [0.90, 0.92, 0.89, 0.93]})
    suite, tables = leaderboard.export_tables("noisy-labels", "sym-0.4")
    tex = exports.tables_latex(suite, tables)
    for command in ("\\toprule", "\\midrule", "\\bottomrule", "\\begin{tabular}"):
        assert command in tex
    assert "my\\_loss\\&co" in tex and "my_loss" not in tex
    best = next(line for line in tex.splitlines() if line.startswith("my\\_loss"))
    assert "\\textbf{91.5 $\\pm$" in best
    twin = next(line for line in tex.splitlines() if line.startswith("twin"))
    assert "$^{\\star}$" in twin and "\\textbf" not in twin
    assert "noisy-labels v1.0" in tex
    assert "\\text{" not in tex and "\\dagger" not in tex  # booktabs only; † is a metric's
    wide = exports.tables_latex(*leaderboard.export_tables("noisy-labels"), interval=True)
    assert "clean & sym-0.4" in wide and "\\scriptsize [" in wide


# --- the cache --------------------------------------------------------------------------

def test_cache_hit_reads_one_row_and_a_new_cell_invalidates_it(board, django_assert_num_queries):
    first = leaderboard.variant_table(SUITE, "sym-0.4")
    key = cache.key("variant", SUITE.name, SUITE.version, "sym-0.4")
    entry = TableCache.objects.get(key=key)
    assert entry.payload == first
    with django_assert_num_queries(2):  # the fingerprint aggregate, then the cached row
        again = leaderboard.variant_table(SUITE, "sym-0.4")
    assert again == first
    store.store_results(board["gce"], SUITE, [CellResult("sym-0.4", 4, "ok",
                                                           {"test_acc": 0.5})], ENV)
    fresh = leaderboard.variant_table(SUITE, "sym-0.4")
    assert _row(fresh, "gce")["seeds"] == 5
    assert _row(fresh, "gce")["mean"] == pytest.approx(np.mean(GCE["sym-0.4"] + [0.5]))
    assert TableCache.objects.get(key=key).fingerprint != entry.fingerprint
    # A cell of another variant leaves this variant's table cached (the suite's table
    # versions are looked up again, the table is not rebuilt) ...
    stored = TableCache.objects.get(key=key)
    store.store_results(board["gce"], SUITE, [CellResult("clean", 4, "ok",
                                                           {"test_acc": 0.5})], ENV)
    leaderboard.variant_table(SUITE, "sym-0.4")
    assert TableCache.objects.get(key=key).updated == stored.updated
    store.store_results(board["gce"], SUITE, [CellResult("sym-0.4", 5, "ok",
                                                           {"test_acc": 0.6})], ENV)
    leaderboard.variant_table(SUITE, "sym-0.4")  # a rebuild is a new write (the check above
    assert TableCache.objects.get(key=key).updated > stored.updated  # can fail)
    with django_assert_num_queries(2):
        leaderboard.variant_table(SUITE, "sym-0.4")
    # ... and a rerun of an existing cell (same count, new finish time) invalidates it.
    store.store_results(board["gce"], SUITE, [CellResult("sym-0.4", 4, "ok",
                                                           {"test_acc": 0.9})], ENV)
    rerun = leaderboard.variant_table(SUITE, "sym-0.4")
    assert _row(rerun, "gce")["mean"] == pytest.approx(np.mean(GCE["sym-0.4"] + [0.9, 0.6]))


def test_summary_cache_invalidates_when_a_cell_is_deleted(board):
    before = leaderboard.suite_summary(SUITE)
    assert _row(before, "mae")["variants_covered"] == 2
    Cell.objects.filter(version=board["mae"], variant="clean").delete()
    after = leaderboard.suite_summary(SUITE)
    assert _row(after, "mae")["variants_covered"] == 1


def _count(fn) -> int:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def test_query_counts_do_not_grow_with_objectives(board):
    def pages():
        leaderboard.home_table()
        leaderboard.suite_page(SUITE, "sym-0.4")
        leaderboard.objective_profile("gce", None, curves={})
    cold = _count(pages)
    warm = _count(pages)
    for i in range(20):
        make_objective(f"extra-{i}", {"clean": [0.9, 0.91], "sym-0.4": [0.7 + i / 100, 0.7]},
                       builtin=False)
    assert _count(pages) <= cold  # recomputed (the fingerprints changed): no more queries
    assert _count(pages) == warm
    assert warm <= 12


def test_unknown_names_raise_not_found():
    for call in (lambda: leaderboard.variant_table("nope", "clean"),
                 lambda: leaderboard.variant_table(SUITE, "nope"),
                 lambda: leaderboard.suite_page("noisy-labels", "nope"),
                 lambda: leaderboard.export_tables("noisy-labels", "nope")):
        with pytest.raises(leaderboard.NotFound):
            call()
    assert isinstance(leaderboard.NotFound("x"), KeyError)


def test_empty_database_gives_empty_tables():
    assert leaderboard.home_table()["rows"] == []
    page = leaderboard.suite_page("noisy-labels")
    assert page["variant"] == "clean" and page["table"]["rows"] == []
    assert math.isfinite(len(page["variants"]))
