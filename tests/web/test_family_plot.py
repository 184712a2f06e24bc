"""The suite page's family plot chooses its lines across the family and never joins
variants an objective did not run (the data it sends; the browser test draws it)."""

from __future__ import annotations

from webapp.leaderboard.plots import FAMILY_SHOWN, family_plot

VARIANTS = ["clean", "sym-0.2", "sym-0.4", "sym-0.6"]
AXIS = {"x_label": "noise rate", "families": [
    {"name": "digits/symmetric", "variants": VARIANTS, "x": [0.0, 0.2, 0.4, 0.6]}]}
SPEC = {"better": "higher", "unit": "fraction"}


def _series(means: dict[str, list[float | None]], reference: str = "ce") -> dict:
    return {"axis": AXIS, "series": {
        label: {"slug": label, "is_builtin": True, "is_reference": label == reference,
                "points": {v: [m, m - 0.01, m + 0.01] for v, m in zip(VARIANTS, ms,
                                                                       strict=True)
                           if m is not None}}
        for label, ms in means.items()}}


def test_lines_are_chosen_across_the_family_not_on_its_first_variant():
    # twelve objectives good on clean and poor under noise, and robust ones a little worse
    # on clean: ranked on clean alone, the robust ones would be 14th and 15th
    means = {f"o{k:02d}": [0.95 - 0.001 * k, 0.70, 0.50, 0.30] for k in range(12)}
    means["robust"] = [0.90, 0.88, 0.86, 0.80]
    means["steady"] = [0.89, 0.87, 0.84, 0.82]  # best on sym-0.6 only
    means["ce"] = [0.9355, 0.69, 0.49, 0.29]
    plot = family_plot(_series(means), list(means), metric="acc", spec=SPEC)
    lines = plot["families"][0]["lines"]
    assert [line["label"] for line in lines[:2]] == ["robust", "steady"]  # best mean rank
    assert lines[0]["mean_rank"] == (14 + 1 + 1 + 2) / 4
    shown = {line["label"] for line in lines if line["shown"]}
    assert {"robust", "steady", "ce", "o00"} <= shown  # o00: best on clean
    assert len(shown) == FAMILY_SHOWN + 1  # + the reference; o00 and steady are in the 8
    assert not next(x for x in lines if x["label"] == "o11")["shown"]


def test_a_line_breaks_where_a_variant_was_not_run():
    plot = family_plot(_series({"ce": [0.9, None, 0.7, 0.6], "gce": [0.9, 0.8, None, None]}),
                       ["ce", "gce"], metric="acc", spec=SPEC)
    by_label = {x["label"]: x for x in plot["families"][0]["lines"]}
    assert by_label["ce"]["x"] == [0.0, 0.2, 0.4, 0.6]
    assert by_label["ce"]["mean"] == [0.9, None, 0.7, 0.6]
    assert by_label["ce"]["low"][1] is None and by_label["ce"]["high"][1] is None
    assert by_label["gce"]["mean"] == [0.9, 0.8, None, None]


def test_lower_is_better_ranks_the_other_way_and_ties_share_places():
    spec = {"better": "lower", "unit": "number"}
    plot = family_plot(_series({"a": [1.0, 2.0, 3.0, 4.0], "b": [1.0, 1.0, 1.0, 1.0]},
                               reference=""), ["a", "b"], metric="rmse", spec=spec)
    lines = plot["families"][0]["lines"]
    assert [x["label"] for x in lines] == ["b", "a"]
    assert lines[0]["mean_rank"] == (1.5 + 1 + 1 + 1) / 4  # a tie on clean: 1.5 each
    assert lines[1]["mean_rank"] == (1.5 + 2 + 2 + 2) / 4


def test_an_objective_with_no_point_in_a_family_has_no_line_there():
    plot = family_plot(_series({"ce": [0.9, 0.8, 0.7, 0.6], "x": [None] * 4}), ["ce", "x"],
                       metric="acc", spec=SPEC)
    assert [x["label"] for x in plot["families"][0]["lines"]] == ["ce"]
