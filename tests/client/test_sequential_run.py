"""``api.run(..., sequential=CAP)``: seeds added a chunk at a time where the comparison with
the reference is undecided, by the pre-declared rule of harness/report/sequential.py; every
look's cells stay stored. 1-epoch runs on the test database."""

from __future__ import annotations

import pytest

from harness import api
from harness.report.sequential import Design, decide


def test_seeds_are_added_only_where_the_verdict_is_undecided(db):
    from harness.storage.models import Cell

    notes = []
    res = api.run("noisy-labels", ["mae", "gce"], variants=["clean", "sym-0.4"], epochs=1,
                  sequential=10, workers=1, progress=False, say=notes.append)
    report = res.sequential
    assert report["design"] == {"start": 5, "step": 5, "cap": 10, "alpha": 0.05,
                                "comparisons": 2}
    assert any(n.startswith("sequential look at 5 seeds: 4 undecided pairs") for n in notes)
    design = Design(5, 5, 10)
    for pair in report["pairs"]:
        # the rule's own answer at each look, recomputed from the stored cells
        for look in pair["looks"]:
            diffs = _improvements(res, pair["objective"], pair["variant"], look["n"])
            d = decide(diffs, design, comparisons=2)
            assert (d.verdict, d.p_value) == (look["verdict"], pytest.approx(look["p"]))
        stored = Cell.objects.filter(version__objective__slug=pair["objective"],
                                     variant=pair["variant"], suite_version="1.0+e1").count()
        assert stored == pair["seeds"]  # every look's cells, no more: a decided pair stops
    assert res.to_json()["sequential"] == report


def _improvements(res, slug: str, variant: str, n: int) -> list[float]:
    frame = res.to_pandas()
    acc = frame[(frame.metric == "test_acc") & (frame.seed < n) & (frame.variant == variant)]
    mine = acc[acc.objective == slug].set_index("seed")["value"]
    ref = acc[acc.objective == "ce"].set_index("seed")["value"]
    return [float(mine[s] - ref[s]) for s in range(n)]


@pytest.mark.parametrize("kwargs, message", [
    ({"sequential": 7}, "plus a multiple of 5"),
    ({"sequential": 10, "tuned": True}, "drop --sequential"),
    ({"sequential": 10, "objectives": "ce"}, "besides the reference")])
def test_a_sequential_run_it_cannot_make_is_refused_before_training(db, kwargs, message):
    from harness.storage.models import Cell

    objectives = kwargs.pop("objectives", "mae")
    with pytest.raises(api.HarnessError, match=message):
        api.run("noisy-labels", objectives, variants=["clean"], epochs=1, workers=1,
                progress=False, **kwargs)
    assert not Cell.objects.exists()
