"""harness.report.figures: known answers on small hand-written payloads, per kind (the pages and a
notebook draw these figures; the browser only calls Plotly.newPlot on them)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from harness.contract.suite import format_value
from harness.report import figures
from harness.report.figures import COLORS, REF, SYMBOLS, build

PERCENT = {"name": "test_acc", "label": "test accuracy", "short": "acc", "better": "higher",
           "unit": "percent", "decimals": 1}
RMSE = {"name": "rmse", "label": "test RMSE", "short": "RMSE", "better": "lower",
        "unit": "number", "decimals": 3}
EVIL = "<img src=x onerror=alert(1)>"
SAFE = "&lt;img src=x onerror=alert(1)&gt;"

STRIP = {"metric": "test accuracy", "spec": PERCENT, "variant": "sym-0.4", "objectives": [
    {"label": "gce", "values": [0.905, 0.93], "seeds": [0, 1], "is_reference": False,
     "tied_with_best": True},
    {"label": "ce", "values": [0.7, 0.71], "seeds": [0, 3], "is_reference": True,
     "tied_with_best": False}]}


def _line(label, mean, *, shown=True, ref=False, x=(0.0, 0.2, 0.4, 0.6)):
    return {"label": label, "is_reference": ref, "shown": shown, "mean_rank": 1.0,
            "x": list(x), "mean": mean,
            "low": [None if m is None else m - 0.01 for m in mean],
            "high": [None if m is None else m + 0.02 for m in mean]}


FAMILY = {"metric": "test accuracy", "spec": PERCENT, "shown": 8, "families": [
    {"name": "digits/symmetric", "x_label": "noise rate", "variants": ["a", "b", "c", "d"],
     "lines": [_line("gce", [0.9, None, 0.7, 0.6]), _line("mae", [0.5, 0.5, 0.5, 0.5],
                                                          shown=False)]},
    {"name": "digits/asymmetric", "x_label": "noise rate", "variants": ["a", "e", "f"],
     "lines": [_line("mae", [0.5, 0.4, 0.3], shown=False, x=(0.0, 0.2, 0.4)),
               _line("ce", [0.8, 0.7, 0.6], ref=True, x=(0.0, 0.2, 0.4))]}]}

CURVE_SPECS = [
    {"name": "test_acc", "label": "test accuracy", "x_label": "epoch", "x_unit": "",
     "unit": "percent", "decimals": 1, "log": False},
    {"name": "grad_norm", "label": "gradient norm", "x_label": "step", "x_unit": "k",
     "unit": "number", "decimals": 2, "log": True},
    {"name": "never", "label": "never stored", "x_label": "epoch", "x_unit": "",
     "unit": "number", "decimals": 3, "log": False}]
CURVES = {"variant": "clean", "specs": CURVE_SPECS, "by_label": {
    "gce": {"is_reference": False, "diverged": [], "curves": {
        "test_acc": {"x": [1, 2, 3], "mean": [0.5, 0.8, 0.9], "low": [0.4, 0.7, 0.85],
                     "high": [0.6, 0.9, 0.95], "n": [2, 2, 2],
                     "seeds": {"10": [0.4, 0.7], "2": [0.6, 0.9, 0.95]}},
        "grad_norm": {"x": [1, 2], "mean": [10.0, 1.0], "low": [9.0, None],
                      "high": [11.0, None], "n": [2, 1]}}},
    "ce": {"is_reference": True, "diverged": [], "curves": {
        "test_acc": {"mean": [0.4, 0.6, 0.7], "low": [0.3, 0.5, 0.6], "high": [0.5, 0.7, 0.8],
                     "n": [2, 2, 2]}}}}}

SCATTER = {"x": "mae", "y": "sign_acc", "x_label": "test MAE", "y_label": "sign accuracy",
           "x_spec": {**RMSE, "label": "test MAE"},
           "y_spec": {**PERCENT, "label": "sign accuracy"},
           "series": [{"label": "huber", "is_reference": False, "x": [0.25, 0.5],
                       "y": [0.75, 0.8], "text": ["clean seed 0", "clean seed 1"]},
                      {"label": "mse", "is_reference": True, "x": [0.3], "y": [0.7],
                       "text": ["clean seed 0"]}]}

RELIABILITY = {"label": "reliability", "variant": "clean", "series": [
    {"label": "huber", "is_reference": False, "confidence": [0.25, None, 0.75],
     "accuracy": [0.2, None, 0.8], "count": [10.5, None, 2.4],
     "seeds": {"1": {"confidence": [0.3, 0.7], "accuracy": [0.2, 0.8]},
               "0": {"confidence": [0.2, 0.8], "accuracy": [0.1, 0.9]}}}]}

FOREST = {"headline_spec": PERCENT, "higher_is_better": False,
          "a": {"label": "gce", "slug": "gce"}, "b": {"label": "ce", "slug": "ce"}, "rows": [
              {"variant": "clean", "pairs": [[0, 0.8, 0.9], [1, 0.85, 0.9]],
               "diff": {"mean_diff": 0.075, "diff_ci_low": 0.05, "diff_ci_high": 0.125}},
              {"variant": "sym-0.2", "pairs": [], "diff": None},
              {"variant": "sym-0.4", "pairs": [[0, 0.5, 0.6]],
               "diff": {"mean_diff": 0.1, "diff_ci_low": None, "diff_ci_high": None}}]}

PROFILE = {"variants": ["clean", "sym-0.4"], "tau": [0.0, 0.1, 0.2], "objectives": [
    {"label": f"o{i}", "is_reference": i == 9, "rho": [0.0, 0.5, 1.0], "wins": 0,
     "worst_gap": 0.2} for i in range(10)]}

CD = {"variants": ["a", "b", "c"], "alpha": 0.05, "cd": 1.6577, "friedman_p": 0.01,
      "objectives": [{"label": "gce", "is_reference": False, "mean_rank": 1.25},
                     {"label": "ce", "is_reference": True, "mean_rank": 2.0},
                     {"label": "mae", "is_reference": False, "mean_rank": 2.75}],
      "groups": [[0, 1], [1, 2]]}

VARIANCE = {"objectives": ["ce", "gce"], "sources": [
    {"name": "init", "label": "initialization", "share": [0.5, None], "low": [0.3, None],
     "high": [0.625, None]},
    {"name": "order", "label": "data order", "share": [0.25, 0.5], "low": [0.0, 0.25],
     "high": [0.5, 0.75]}]}

HEATMAP = {"label": "errors", "variant": "out-0.2", "spec": {**PERCENT, "better": "lower"},
           "metrics": [{**PERCENT, "label": "error", "short": "err", "better": "lower"},
                       {**PERCENT, "label": "worst error", "short": "worst",
                        "better": "lower"}],
           "columns": ["err", "worst"], "objectives": ["huber", "mse"],
           "is_reference": [False, True], "z": [[0.125, None], [0.25, 0.5]]}

ACROSS = {"label": "my<loss>", "suites": [
    {"suite": "noisy-labels", "status": "scored", "reference": "ce",
     "seeds": {"clean": [0.9, 0.8], "sym-0.4": [0.5, 0.7]},
     "band": {"clean": {"low": 0.6, "high": 0.95, "reference": 0.85}}},
    {"suite": "calibration", "status": "provisional", "reference": "ce", "seeds": {},
     "band": {}},
    {"suite": "certified", "status": "scored", "reference": "ce", "seeds": {"eps": [0.1]},
     "band": {"eps": {"low": 0.0, "high": 0.3, "reference": 0.0}}}]}

BUDGET = {"metric": PERCENT, "k": 3, "rows": [
    {"label": "gce", "is_reference": False,
     "budget": {"budgets": [1, 2, 3], "mean": [0.5, 0.625, 0.75], "low": [0.25, 0.5, 0.75],
                "high": [0.75, 0.75, 0.75]}},
    {"label": "ce", "is_reference": True, "budget": None}]}

SENSITIVITY = {"metric": PERCENT, "dimension": "lr", "log": True, "rows": [
    {"label": "gce", "is_reference": False,
     "points": [[0.01, 0.5, 0, 0], [0.1, None, 0, 1], [0.1, 0.25, 1, 1]]}]}

PAYLOADS = {"strip": STRIP, "family": FAMILY, "curves": CURVES, "scatter": SCATTER,
            "reliability": RELIABILITY, "forest": FOREST, "profile": PROFILE, "cd": CD,
            "variance": VARIANCE, "heatmap": HEATMAP, "across_suites": ACROSS,
            "budget": BUDGET, "sensitivity": SENSITIVITY}


def _title(fig: dict, axis: str = "xaxis") -> str:
    return fig["layout"][axis]["title"]["text"]


def test_every_kind_has_a_payload_here():
    assert set(PAYLOADS) == set(figures.KINDS)


def test_budget_draws_a_closed_band_and_a_curve_per_objective_with_one():
    band, curve = build("budget", BUDGET)["data"]  # ce has no curve: no trace at all
    assert band["x"] == [1, 2, 3, 3, 2, 1]
    assert band["y"] == [75.0, 75.0, 75.0, 75.0, 50.0, 25.0]  # high out, low back, ×100
    assert curve["name"] == "gce" and curve["y"] == [50.0, 62.5, 75.0]


def test_sensitivity_puts_every_scored_seed_on_the_declared_axis():
    fig = build("sensitivity", SENSITIVITY)
    (gce,) = fig["data"]
    assert gce["x"] == [0.01, 0.1] and gce["y"] == [50.0, 25.0]  # the failed seed dropped
    assert gce["text"] == ["trial 0, seed 0", "trial 1, seed 1"]
    assert fig["layout"]["xaxis"]["type"] == "log" and _title(fig) == "lr"


def test_strip_draws_percents_as_the_tables_do():
    fig = build("strip", STRIP)
    gce, ce = fig["data"]
    assert [gce["name"], ce["name"]] == ["gce ★", "ce"]  # ★: tied with the best
    assert gce["x"] == [90.5, 93.0] and ce["x"] == [70.0, 71.0]
    # the drawn value prints as format_value prints the stored one
    assert [f"{x:.1f}" for x in gce["x"]] == [format_value(v, "percent", 1)
                                               for v in STRIP["objectives"][0]["values"]]
    assert ce["text"] == ["seed 0", "seed 3"]
    assert gce["marker"]["color"] == COLORS[0] and ce["marker"]["color"] == REF
    assert gce["hovertemplate"] == "%{text}: %{x:.1f}<extra>gce ★</extra>"
    assert _title(fig) == "test accuracy (%) — higher is better"
    assert fig["layout"]["template"]["data"]["box"][0]["boxpoints"] == "all"  # every seed
    assert fig["layout"]["height"] == 260


def test_objectives_differ_by_marker_as_well_as_colour_past_the_palette():
    """Colours repeat after 10 (ldr_kl and boot_soft were one colour): each label also gets
    a marker shape, so the first 40 never share both and none is told by colour alone."""
    payload = {**STRIP, "objectives": [
        {"label": f"o{i}", "values": [0.5], "seeds": [0], "is_reference": False}
        for i in range(40)]}
    markers = [t["marker"] for t in build("strip", payload)["data"]]
    assert len({(m["color"], m["symbol"]) for m in markers}) == 40
    assert markers[10]["color"] == markers[0]["color"] != markers[1]["color"]
    assert markers[10]["symbol"] != markers[0]["symbol"]
    assert all(s in SYMBOLS for s in {m["symbol"] for m in markers})


def test_a_number_metric_is_not_scaled_and_says_its_direction():
    payload = {**STRIP, "metric": "test RMSE", "spec": RMSE}
    fig = build("strip", payload)
    assert fig["data"][0]["x"] == [0.905, 0.93]
    assert _title(fig) == "test RMSE — lower is better"
    assert fig["data"][0]["hovertemplate"].startswith("%{text}: %{x:.3f}")
    neither = build("strip", {**payload, "spec": {**RMSE, "better": "neither"}})
    assert _title(neither) == "test RMSE"


def test_family_bands_break_at_a_missing_variant_and_hidden_lines_are_legend_only():
    fig = build("family", FAMILY)
    # a band and a line per (family, objective), and gce's dotted bridge over its gap
    assert len(fig["data"]) == 9
    band, bridge, gce = fig["data"][0], fig["data"][1], fig["data"][2]
    assert gce["name"] == "gce" and gce["y"] == [90.0, None, 70.0, 60.0]
    assert (bridge["x"], bridge["y"], bridge["line"]["dash"]) == ([0.0, 0.4], [90.0, 70.0], "dot")
    assert bridge["hoverinfo"] == "skip" and bridge["legendgroup"] == "gce"
    assert gce["x"] == [0.0, 0.2, 0.4, 0.6]
    # one polygon for the first point, None, one for the last two (high out, low back)
    assert band["fill"] == "toself" and band["hoverinfo"] == "skip"
    assert band["x"] == [0.0, 0.0, None, 0.4, 0.6, 0.6, 0.4]
    assert band["y"] == pytest.approx([92.0, 89.0, None, 72.0, 62.0, 59.0, 69.0])
    assert band["y"][2] is None and band["legendgroup"] == "gce"
    # mae is not shown in the first family, and in no other: legend only, band too
    by_name = {(t.get("name"), t.get("xaxis", "x"), t.get("fill")): t for t in fig["data"]}
    assert by_name["mae", "x", None]["visible"] == "legendonly"
    assert by_name["mae", "x2", None]["visible"] == "legendonly"
    assert band["visible"] is True and fig["data"][3]["visible"] == "legendonly"  # mae's
    assert [t["showlegend"] for t in fig["data"] if "name" in t] == [True, True, False, True]
    ce = by_name["ce", "x2", None]
    assert ce["line"]["dash"] == "dash" and ce["line"]["color"] == REF
    assert ce["yaxis"] == "y2"
    assert _title(fig) == "noise rate · digits/symmetric"
    assert _title(fig, "xaxis2") == "noise rate · digits/asymmetric"
    assert _title(fig, "yaxis") == "test accuracy (%)" and _title(fig, "yaxis2") == ""
    assert fig["layout"]["grid"] == {"rows": 1, "columns": 2, "pattern": "independent"}
    # one metric, one scale: a panel of one point is not zoomed into its own interval
    assert "matches" not in fig["layout"]["yaxis"] and fig["layout"]["yaxis2"]["matches"] == "y"


def test_family_values_are_drawn_to_six_significant_digits():
    """The family figure is the suite page's weight (every objective × variant): its values
    are rounded far below what a plot or hover shows, never beyond."""
    mean = [0.72345678912345, 0.0163265306122449, None, 1e-9 / 3]
    payload = {"metric": "test accuracy", "spec": PERCENT, "shown": 8, "families": [
        {"name": "f", "x_label": "noise rate", "variants": ["a", "b", "c", "d"],
         "lines": [_line("gce", mean, x=(0.0, 0.0163265306122449, 0.5, 2 / 3))]}]}
    band, bridge, line = build("family", payload)["data"]
    assert line["y"] == [72.3457, 1.63265, None, 3.33333e-08]
    assert bridge["x"] == [0.0163265, 0.666667]
    assert line["x"] == [0.0, 0.0163265, 0.5, 0.666667]
    for v, exact in zip(line["y"], mean, strict=True):
        assert v is None or v == pytest.approx(100 * exact, rel=1e-5)
    assert all(v == float(f"{v:.6g}") for v in band["y"] if v is not None)  # 6 at most


def test_a_label_shown_in_one_family_is_shown_in_all():
    payload = json.loads(json.dumps(FAMILY))
    payload["families"][1]["lines"][0]["shown"] = True  # mae, second family
    fig = build("family", payload)
    assert {t["visible"] for t in fig["data"] if t["legendgroup"] == "mae"} == {True}


def test_curves_panels_bands_and_legend_only_seeds():
    fig = build("curves", CURVES)
    layout = fig["layout"]
    # two panels (the curve nobody stored has none): gce band, mean, 2 seeds; ce mean;
    # then gce's gradient norm band and mean
    assert len(fig["data"]) == 7 and "xaxis3" not in layout
    assert layout["grid"] == {"rows": 1, "columns": 2, "pattern": "independent"}
    assert layout["height"] == 380
    assert _title(fig, "yaxis") == "test accuracy (%)" and _title(fig) == "epoch"
    assert _title(fig, "yaxis2") == "gradient norm" and _title(fig, "xaxis2") == "step (k)"
    assert layout["yaxis"]["type"] == "linear" and layout["yaxis2"]["type"] == "log"
    band, mean, seed2, seed10, ce, *_ = fig["data"]
    assert band["fill"] == "toself" and band["x"] == [1, 2, 3, 3, 2, 1]
    assert band["y"] == [60.0, 90.0, 95.0, 85.0, 70.0, 40.0]
    assert mean["name"] == "gce mean" and mean["y"] == [50.0, 80.0, 90.0]
    assert [seed2["name"], seed10["name"]] == ["gce seed 2", "gce seed 10"]  # numeric order
    assert seed10["x"] == [1, 2] and seed10["y"] == [40.0, 70.0]  # cut to its length
    assert {seed2["visible"], seed10["visible"]} == {"legendonly"}
    assert seed10["legendgroup"] == "gce/10"
    assert ce["name"] == "ce mean" and ce["x"] == [1, 2, 3]  # no x stored: 1…n
    assert ce["line"]["dash"] == "dash"
    assert not any(t.get("legendgroup") == "ce" and t.get("fill") for t in fig["data"])
    grad_band, grad = fig["data"][5:]
    assert grad_band["x"] == [1, 1] and grad["y"] == [10.0, 1.0]  # not a percent
    assert grad["xaxis"] == "x2" and grad["showlegend"] is False  # legend: first panel
    assert grad["hovertemplate"] == "gce step %{x}: %{y:.2f}<extra>gradient norm</extra>"


def test_a_curve_on_named_points_shows_their_names_on_the_axis_and_in_the_hover():
    """The unlearning suites' robustness view: points 1..5 are attacks, not numbers."""
    ticks = ["unlearned", "relearned", "8-bit", "4-bit", "4-bit <grouped>"]
    spec = {**CURVE_SPECS[1], "name": "attacks", "x_label": "attack", "x_unit": "",
            "log": False, "x_ticks": ticks}
    curve = {"x": [1, 2, 3, 4, 5], "mean": [0.1, 0.5, 0.1, 0.3, 0.2], "n": [2] * 5,
             "low": [0.0] * 5, "high": [0.6] * 5, "seeds": {"0": [0.1, 0.4, 0.1, 0.3, 0.2]}}
    fig = build("curves", {"variant": "forget10", "specs": [spec], "by_label": {
        "npo": {"is_reference": False, "curves": {"attacks": curve}}}})
    axis = fig["layout"]["xaxis"]
    shown = ["unlearned", "relearned", "8-bit", "4-bit", "4-bit &lt;grouped&gt;"]
    assert axis["tickvals"] == [1, 2, 3, 4, 5] and axis["ticktext"] == shown  # escaped
    _, mean, seed = fig["data"]
    assert mean["customdata"] == shown and seed["customdata"] == shown
    assert mean["hovertemplate"] == "npo %{customdata}: %{y:.2f}<extra>gradient norm</extra>"
    # a numeric axis has none of it
    plain = build("curves", CURVES)
    assert "tickvals" not in plain["layout"]["xaxis"] and "customdata" not in plain["data"][1]


def test_curves_wrap_at_three_panels_per_row_and_say_when_there_are_none():
    specs = [{**CURVE_SPECS[1], "name": f"c{i}", "label": f"curve {i}"} for i in range(4)]
    curve = CURVES["by_label"]["gce"]["curves"]["grad_norm"]
    fig = build("curves", {"variant": "clean", "specs": specs, "by_label": {
        "gce": {"is_reference": False, "curves": {f"c{i}": curve for i in range(4)}}}})
    assert fig["layout"]["grid"]["rows"] == 2 and fig["layout"]["grid"]["columns"] == 3
    assert fig["layout"]["height"] == 700 and _title(fig, "yaxis4") == "curve 3"
    for empty in (None, {"variant": "clean", "specs": CURVE_SPECS, "by_label": {}},
                  {"specs": specs, "by_label": CURVES["by_label"]}):
        fig = build("curves", empty)
        assert fig["data"] == []
        assert fig["layout"]["annotations"][0]["text"] == "No curves stored."


def test_scatter_scales_each_axis_by_its_own_unit():
    fig = build("scatter", SCATTER)
    huber, mse = fig["data"]
    assert huber["x"] == [0.25, 0.5] and huber["y"] == [75.0, 80.0]
    assert huber["text"] == ["clean seed 0", "clean seed 1"]
    assert mse["marker"]["symbol"] == "circle-open" and huber["marker"]["symbol"] == "circle"
    assert _title(fig) == "test MAE — lower is better"
    assert _title(fig, "yaxis") == "sign accuracy (%) — higher is better"
    assert huber["hovertemplate"] == "%{text}: (%{x:.3f}, %{y:.1f})<extra>huber</extra>"


def test_reliability_has_the_diagonal_the_means_and_each_seed_hidden():
    fig = build("reliability", RELIABILITY)
    diagonal, huber, seed0, seed1 = fig["data"]
    assert diagonal["x"] == [0, 1] and diagonal["y"] == [0, 1]
    assert huber["x"] == [0.25, None, 0.75] and huber["y"] == [0.2, None, 0.8]
    assert huber["text"] == ["11 samples", "", "2 samples"]  # rounded half up
    assert [seed0["name"], seed1["name"]] == ["huber seed 0", "huber seed 1"]
    assert seed0["x"] == [0.2, 0.8] and seed0["visible"] == "legendonly"
    assert fig["layout"]["xaxis"]["range"] == [0, 1]
    assert _title(fig) == "mean confidence in the bin"


def test_forest_differences_point_the_way_of_better():
    fig = build("forest", FOREST)
    seeds, mean = fig["data"]
    # lower is better here: b − a, in percentage points; sym-0.2 has no pair
    assert seeds["x"] == pytest.approx([10.0, 5.0, 10.0])
    assert seeds["y"] == ["clean", "clean", "sym-0.4"]
    assert seeds["text"] == ["seed 0", "seed 1", "seed 0"]
    assert mean["y"] == ["clean", "sym-0.4"] and mean["x"] == [7.5, 10.0]
    assert mean["error_x"]["array"] == [5.0, 0] and mean["error_x"]["arrayminus"] == [2.5, 0]
    assert _title(fig) == "gce better than ce by (pp)"
    assert fig["layout"]["height"] == 260


def test_profile_shows_eight_lines_and_the_reference():
    fig = build("profile", PROFILE)
    visible = [t["visible"] for t in fig["data"]]
    assert visible == [True] * 8 + ["legendonly", True]  # o9 is the reference
    assert fig["data"][0]["x"] == [0.0, 0.1, 0.2] and fig["data"][0]["y"] == [0.0, 0.5, 1.0]
    assert fig["data"][9]["line"]["dash"] == "dash"
    assert fig["layout"]["template"]["data"]["scatter"][0]["line"]["shape"] == "hv"
    assert fig["layout"]["yaxis"]["tickformat"] == ".0%"


def test_cd_gives_each_group_a_lane_and_draws_the_critical_difference():
    fig = build("cd", CD)
    ranks, bar, first, second = fig["data"]
    assert ranks["y"] == ["gce", "ce", "mae"] and ranks["x"] == [1.25, 2.0, 2.75]
    assert bar["x"] == [1.25, 1.25 + 1.6577] and bar["y"] == ["gce", "gce"]
    assert bar["name"] == "critical difference 1.66"
    # the two overlapping groups (rows 0–1 and 1–2) in lanes of their own, right of rank 3
    assert (first["x"], first["y"]) == ([3.8, 3.8], ["gce", "ce"])
    assert (second["x"], second["y"]) == (pytest.approx([4.1, 4.1]), ["ce", "mae"])
    assert [first["showlegend"], second["showlegend"]] == [True, False]
    assert fig["layout"]["xaxis"]["range"] == pytest.approx([0.5, 4.4])
    assert fig["layout"]["yaxis"]["categoryarray"] == ["gce", "ce", "mae"]
    assert fig["layout"]["annotations"][0]["text"].startswith(
        "The critical difference (1.66) spans more than half of the 3 ranks")
    assert build("cd", {**CD, "cd": 1.125})["data"][1]["name"] == \
        "critical difference 1.13"  # half up, as JavaScript's toFixed
    assert build("cd", {**CD, "cd": 0.9})["layout"]["annotations"] == []  # under half


def test_variance_bars_in_percent_with_their_interval():
    fig = build("variance", VARIANCE)
    init, order = fig["data"]
    assert init["x"] == [50.0, None] and init["y"] == ["ce", "gce"]
    assert init["error_x"]["array"] == [12.5, 0] and init["error_x"]["arrayminus"] == [20.0, 0]
    assert order["x"] == [25.0, 50.0] and order["marker"]["color"] == COLORS[1]
    assert init["hovertemplate"] == "%{y} · initialization: %{x:.0f}%<extra></extra>"
    assert fig["layout"]["barmode"] == "group" and fig["layout"]["height"] == 270


def test_heatmap_is_oriented_once_and_keeps_blanks():
    fig = build("heatmap", HEATMAP)
    (trace,) = fig["data"]
    assert trace["z"] == [[12.5, None], [25.0, 50.0]]
    assert trace["x"] == ["err", "worst"] and trace["y"] == ["huber", "mse"]
    assert trace["text"] == [["error", "worst error"], ["error", "worst error"]]
    assert trace["reversescale"] is True  # lower is better: dark = low
    assert trace["colorbar"]["title"]["text"] == "lower is better (%)"
    higher = build("heatmap", {**HEATMAP, "spec": PERCENT})["data"][0]
    assert higher["reversescale"] is False
    assert higher["colorbar"]["title"]["text"] == "higher is better (%)"


TEXT_KEYS = {"label", "metric", "x_label", "y_label", "x_unit", "objectives", "columns"}


def _relabel(x, prefix: str, key: str | None = None):
    """The payload with ``prefix`` before every text plotly shows: labels, titles, the
    ``by_label`` keys, family and source names (not curve or metric names: those are keys)."""
    if isinstance(x, dict):
        return {(prefix + k if key == "by_label" else k): _relabel(v, prefix, k)
                for k, v in x.items()}
    if isinstance(x, list):
        return [_relabel(v, prefix, key) for v in x]
    if isinstance(x, str) and key in TEXT_KEYS:
        return prefix + x
    return x


def _named(payload: dict, prefix: str) -> dict:
    out = _relabel(payload, prefix)
    for group in ("families", "sources"):
        for item in out.get(group, []):
            item["name"] = prefix + item["name"]
    return out


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_every_label_is_escaped(kind):
    fig = build(kind, _named(PAYLOADS[kind], EVIL))
    assert len(fig["data"]) == len(build(kind, PAYLOADS[kind])["data"])  # all still drawn
    text = json.dumps(fig)
    assert "<img" not in text and "onerror=alert(1)>" not in text
    assert SAFE in text


def test_escape_is_the_pages_rule():
    assert figures.escape("a&b <i>x</i>") == "a&amp;b &lt;i&gt;x&lt;/i&gt;"
    assert figures.escape(3) == "3"


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_plotly_accepts_every_figure(kind):
    fig = figures.figure(kind, PAYLOADS[kind])  # go.Figure validates every attribute
    assert isinstance(fig, go.Figure)
    built = build(kind, PAYLOADS[kind])
    assert len(fig.data) == len(built["data"])
    assert fig.to_dict()["data"][0]["type"] == built["data"][0]["type"]
    json.dumps(built, allow_nan=False)  # plain JSON, as the pages write it


def test_plotly_accepts_the_empty_curves_figure():
    assert isinstance(figures.figure("curves", {"specs": [], "by_label": {}}), go.Figure)


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="no figure kind 'pie'.*strip"):
        build("pie", {})
    with pytest.raises(ValueError, match="no figure kind"):
        figures.figure("pie", {})


def test_across_suites_draws_one_panel_per_scored_suite():
    fig = build("across_suites", ACROSS)
    layout = fig["layout"]
    assert [layout[a]["title"]["text"] for a in ("xaxis", "xaxis2")] == [
        "noisy-labels", "certified"] and "xaxis3" not in layout  # provisional: no panel
    band, ref, seeds, mean = fig["data"][:4]
    assert band["base"] == [0.6, None] and band["y"][0] == pytest.approx(0.35)
    assert band["y"][1] is None  # no baseline band on sym-0.4
    assert ref["y"] == [0.85, None]
    assert seeds["x"] == ["clean", "clean", "sym-0.4", "sym-0.4"]
    assert seeds["y"] == [0.9, 0.8, 0.5, 0.7]
    assert mean["y"] == pytest.approx([0.85, 0.6])
    assert seeds["name"] == "my&lt;loss&gt;, per seed"  # a user's name, escaped
    assert fig["data"][4]["xaxis"] == "x2" and fig["data"][4]["yaxis"] == "y2"
    assert layout["xaxis"]["domain"][1] < layout["xaxis2"]["domain"][0]


def test_a_figure_in_words_names_its_axes_series_and_values_and_skips_bands():
    from harness.report.describe import describe

    cd = describe(build("cd", CD))
    assert cd.startswith("Axes — across: mean rank over the ranked variants (1 = best).")
    assert "mean rank: gce: 1.25, ce: 2, mae: 2.75" in cd  # names on y: read name → value
    assert cd.endswith("with 3 variants most ranks are not resolved.")  # the plot's note
    family = describe(build("family", FAMILY))
    # two panels: each series named with its panel; the band polygons are not series;
    # a legend-only line is not read; a gap (None) is left out
    assert "gce (noise rate · digits/symmetric): 0: 90, 0.4: 70, 0.6: 60" in family
    assert "mae" not in family and "band" not in family
    assert describe(None) == "" and describe({"data": [], "layout": {}}) == "No series to show."
