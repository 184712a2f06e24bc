"""A landing cell recomputes only what it touches, and what is served is always what a
fresh computation gives (real PostgreSQL, cells stored through store.store_results).

Builds are counted by wrapping the functions that compute (a spy: they still run).
"""

from __future__ import annotations

import pytest
from django.db.models import Q

from harness.contract.suite import CellResult
from harness.report import stats
from harness.storage import store
from harness.storage.models import Cell, TableCache
from tests.web.test_leaderboard import CE, ENV, GCE, MAE, SUITE, make_objective
from webapp import leaderboard
from webapp.leaderboard import boards, pieces

pytestmark = pytest.mark.django_db


def _land(version, variant: str, seed: int, acc: float, status: str = "ok") -> None:
    metrics = {"test_acc": acc, "best_test_acc": acc + 0.01, "noise_rate": 0.4}
    store.store_results(version, SUITE, [CellResult(variant, seed, status, metrics)], ENV)


def _everything(compare: bool = True) -> dict:
    """Every payload a page or the API shows for the suite (the compare page computes its
    own paired comparisons: ``compare=False`` leaves it out)."""
    return {"clean": leaderboard.suite_page(SUITE, "clean"),
            "sym": leaderboard.suite_page(SUITE, "sym-0.4", kind="builtin", limit=2),
            "home": leaderboard.home_table(), "summary": leaderboard.suite_summary(SUITE),
            "tables": leaderboard.export_tables(SUITE)[1],
            "asym": leaderboard.variant_table(SUITE, "asym-0.4"),
            "gce": leaderboard.objective_profile("gce", None, curves="all"),
            "mae": leaderboard.objective_profile("mae", None, curves={"noisy-labels": "clean"}),
            "compare": compare and _or_missing(lambda: leaderboard.compare("gce", "mae",
                                                                           SUITE)),
            "series": leaderboard.family_series(SUITE)}


def _or_missing(call):
    try:
        return call()
    except leaderboard.NotFound as e:  # mae's cells are all deleted in the last step
        return str(e)


def _fresh() -> dict:
    TableCache.objects.all().delete()
    return _everything()


class Spy:
    """Counts calls of ``module.name`` (and the first argument of each)."""

    def __init__(self, monkeypatch, module, name: str):
        self.calls: list = []
        real = getattr(module, name)

        def spy(*args, **kwargs):
            self.calls.append(args[0] if args else None)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)


def test_cached_pages_equal_a_fresh_computation_through_lands_reruns_and_deletes():
    ce, gce, mae = (make_objective("ce", CE), make_objective("gce", GCE),
                    make_objective("mae", MAE))
    _land(mae, "asym-0.4", 0, 0.8)
    _land(mae, "asym-0.4", 1, 0.81)
    steps = [
        ("a new seed in one variant", lambda: _land(gce, "sym-0.4", 4, 0.5)),
        ("a new seed in another", lambda: _land(mae, "clean", 4, 0.93)),
        ("a rerun of the reference's cell", lambda: _land(ce, "sym-0.4", 0, 0.55)),
        ("a rerun that diverged", lambda: _land(gce, "clean", 1, 0.2, status="diverged")),
        ("a deleted cell", lambda: Cell.objects.filter(version=mae, variant="sym-0.4",
                                                       seed=1).delete()),
        ("a cell failed by the reaper", lambda: store.finish(
            Q(version=gce, variant="sym-0.4", seed=2), Cell.FAILED, "infrastructure", "lost")),
        ("a cell claimed again (running)", lambda: store.claim(
            [Cell.objects.get(version=gce, variant="sym-0.4", seed=2).pk], worker="w")),
        ("a new version's first cell elsewhere", lambda: make_objective(
            "mae", {"clean": [0.5, 0.52, 0.51]}, code="new mae\n")),
        ("a version whose cells all fail", lambda: store.store_results(
            make_objective("killed", {}, builtin=False), SUITE,
            [CellResult("asym-0.4", 0, "killed", error="x", reason="violation")], ENV)),
        ("every mae cell deleted", lambda: Cell.objects.filter(
            version__objective__slug="mae").delete()),
    ]
    assert _everything() == _fresh()
    for what, step in steps:
        step()
        assert _everything() == _fresh(), what


def test_a_new_version_elsewhere_changes_every_variant_table():
    """A version's first trained cell, in any variant, makes it the one the tables show:
    the tables of the other variants must not stay cached on their own cells' fingerprint
    (they did: the old gce version stayed on sym-0.4)."""
    make_objective("ce", CE)
    old = make_objective("gce", GCE)
    assert old.pk in [r["version_id"] for r in leaderboard.variant_table(SUITE, "sym-0.4")["rows"]]
    new = make_objective("gce", {"clean": [0.9, 0.91, 0.92]}, code="v2\n")
    ids = [r["version_id"] for r in leaderboard.variant_table(SUITE, "sym-0.4")["rows"]]
    assert old.pk not in ids and new.pk not in ids  # the newest has no sym-0.4 cells


def test_a_landing_recomputes_only_what_it_touches(monkeypatch):
    make_objective("ce", CE)
    make_objective("gce", GCE)
    mae = make_objective("mae", MAE)
    _everything()  # every payload cached
    built = Spy(monkeypatch, boards, "_build_variant_table")
    compared = Spy(monkeypatch, stats, "compare_paired")
    rows = Spy(monkeypatch, boards, "relative")
    summary_reads = Spy(monkeypatch, boards, "headline_values")
    piece_reads = Spy(monkeypatch, pieces, "headline_values")

    _land(mae, "sym-0.4", 0, 0.75)  # a rerun; mae is neither the reference nor the best
    cached = _everything(compare=False)
    # only sym-0.4's table was rebuilt, however many pages showed clean's and the others'
    assert [state.suite for state in built.calls] == [SUITE]
    # its comparison: mae against the reference, not gce's (a rebuild without the memo
    # computes both; ★ comes from the rank interval, with no comparison against the best)
    assert len(compared.calls) == 1
    # the suite summary recomputed mae's row alone (of three), reading mae's and the
    # reference's values; sym-0.4's piece was the one piece rebuilt
    assert len(rows.calls) == 1 and len(summary_reads.calls) == 1
    assert len(piece_reads.calls) == 1
    TableCache.objects.all().delete()
    assert cached == _everything(compare=False)


def test_a_cell_landing_during_a_build_never_leaves_a_stale_entry_looking_fresh(monkeypatch):
    """The fingerprints are taken before the cells are read: a cell stored while a page is
    being built makes the stored entry stale, so the next request rebuilds it."""
    make_objective("ce", CE)
    gce = make_objective("gce", GCE)
    leaderboard.suite_page(SUITE, "sym-0.4")
    real = pieces.headline_values
    landed = []

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        if not landed:  # after the build read its cells, before it stores anything
            landed.append(True)
            _land(gce, "sym-0.4", 7, 0.3)
        return out

    _land(gce, "sym-0.4", 5, 0.95)
    monkeypatch.setattr(pieces, "headline_values", racing)
    monkeypatch.setattr(boards, "headline_values", racing)
    leaderboard.suite_page(SUITE, "sym-0.4")
    monkeypatch.undo()
    assert landed
    served = {"page": leaderboard.suite_page(SUITE, "sym-0.4"),
              "summary": leaderboard.suite_summary(SUITE)}
    gce_row = next(r for r in served["page"]["table"]["rows"] if r["objective"] == "gce")
    assert gce_row["seeds"] == 6  # four, seed 5, and seed 7 that landed mid-build
    TableCache.objects.all().delete()
    assert served == {"page": leaderboard.suite_page(SUITE, "sym-0.4"),
                      "summary": leaderboard.suite_summary(SUITE)}


def test_the_comparison_memo_is_exact():
    """A table built from remembered comparisons equals one computed without the memo."""
    make_objective("ce", CE)
    make_objective("gce", GCE)
    mae = make_objective("mae", MAE)
    leaderboard.variant_table(SUITE, "sym-0.4")
    _land(mae, "sym-0.4", 4, 0.72)
    remembered = leaderboard.variant_table(SUITE, "sym-0.4")
    TableCache.objects.all().delete()
    assert remembered == leaderboard.variant_table(SUITE, "sym-0.4")
