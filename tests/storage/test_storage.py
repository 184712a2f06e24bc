"""Result storage on a real PostgreSQL: one row per cell, replaced never duplicated."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.objectives.loading import load_objective
from harness.storage import store
from harness.storage.models import Cell, Curve, Metric, ObjectiveVersion

pytestmark = pytest.mark.django_db
SUITE = get_suite("noisy-labels")
ENV = {"python": "3.11", "device": "cpu"}


def _result(variant: str, seed: int, acc: float, status: str = "ok") -> CellResult:
    return CellResult(variant, seed, status, {"test_acc": acc, "noise_rate": 0.4},
                      {"test_acc": [acc / 2, acc]}, wall_time=1.5)


def test_runs_on_postgres():
    assert connection.vendor == "postgresql"


def test_version_identity_follows_code_and_hyperparameters():
    a = store.version_for(load_objective("gce"))
    b = store.version_for(load_objective("gce"))
    c = store.version_for(load_objective("gce", {"q": 0.5}))
    assert a.pk == b.pk
    assert c.pk != a.pk and c.objective_id == a.objective_id
    assert c.label == "gce(q=0.5)" and a.label == "gce"
    assert a.code_sha256 == load_objective("gce").code_sha256
    assert a.objective.is_builtin


def test_storing_a_cell_twice_keeps_one_row_with_the_latest_values():
    version = store.version_for(load_objective("ce"))
    store.store_results(version, SUITE, [_result("sym-0.4", 0, 0.70)], ENV)
    store.store_results(version, SUITE, [_result("sym-0.4", 0, 0.71)], ENV)
    cell = Cell.objects.get(version=version, suite="noisy-labels", variant="sym-0.4", seed=0)
    assert cell.attempts == 2
    assert Cell.objects.filter(version=version).count() == 1
    assert Metric.objects.filter(cell=cell).count() == 2
    assert Metric.objects.get(cell=cell, name="test_acc").value == pytest.approx(0.71)
    assert Curve.objects.get(cell=cell, name="test_acc").values == [0.355, 0.71]
    assert cell.variant_hash == SUITE.variant("sym-0.4").config_hash(SUITE)
    assert cell.environment["device"] == "cpu"


def test_database_refuses_a_duplicate_cell():
    version = store.version_for(load_objective("ce"))
    key = dict(version=version, suite="noisy-labels", suite_version="1.0", variant="clean",
               seed=3, variant_hash="x")
    Cell.objects.create(**key)
    with pytest.raises(IntegrityError), transaction.atomic():
        Cell.objects.create(**key)


def test_finished_cells_and_rows_for_tables():
    ce = store.version_for(load_objective("ce"))
    gce = store.version_for(load_objective("gce"))
    store.store_results(ce, SUITE, [_result("sym-0.4", s, 0.7) for s in range(3)], ENV)
    store.store_results(gce, SUITE, [_result("sym-0.4", 0, 0.9),
                                       _result("sym-0.4", 1, 0.0, status="diverged")], ENV)
    assert store.finished_cells(gce, SUITE, ["sym-0.4"], range(3)) == {
        ("sym-0.4", 0), ("sym-0.4", 1)}
    rows = store.cell_rows(SUITE, ["sym-0.4"])
    assert sorted((r.objective, r.seed, r.status) for r in rows) == [
        ("ce", 0, "ok"), ("ce", 1, "ok"), ("ce", 2, "ok"), ("gce", 0, "ok"),
        ("gce", 1, "diverged")]
    assert store.reference_version(SUITE).pk == ce.pk
    assert {v.pk for v in store.latest_versions(SUITE)} == {ce.pk, gce.pk}


def test_results_of_other_suite_versions_are_not_mixed():
    ce = store.version_for(load_objective("ce"))
    smoke = SUITE.shortened(2)
    store.store_results(ce, smoke, [_result("clean", 0, 0.5)], ENV)
    assert store.cell_rows(SUITE) == []
    assert len(store.cell_rows(smoke)) == 1
    assert store.latest_versions(SUITE) == []


def test_interrupted_store_leaves_no_partial_cell():
    version = store.version_for(load_objective("ce"))
    bad = CellResult("no-such-variant", 0, "ok", {"test_acc": 1.0})
    with pytest.raises(KeyError):
        store.store_results(version, SUITE, [_result("clean", 0, 0.9), bad], ENV)
    assert not Cell.objects.filter(version=version).exists()
    assert ObjectiveVersion.objects.filter(pk=version.pk).exists()


def test_non_finite_values_are_stored_as_json_null_and_skipped_metrics():
    version = store.version_for(load_objective("ce"))
    result = CellResult("clean", 0, "diverged", {"test_acc": float("nan"), "noise_rate": 0.0},
                        {"train_loss": [1.0, float("nan"), float("inf")]}, diverged_step=3)
    store.store_results(version, SUITE, [result], ENV)
    cell = Cell.objects.get(version=version, variant="clean", seed=0)
    assert Curve.objects.get(cell=cell, name="train_loss").values == [1.0, None, None]
    assert set(cell.metrics.values_list("name", flat=True)) == {"noise_rate"}


def test_text_postgres_refuses_is_stored_escaped():
    """An objective that prints a NUL byte or raises with a lone surrogate in its message
    still gets its cell stored (PostgreSQL refuses both in a text column)."""
    version = store.version_for(load_objective("ce"))
    result = CellResult("clean", 0, "failed", {}, {}, error="bad\x00 \udcff", reason="objective",
                        captured="out\x00put\n")
    store.store_results(version, SUITE, [result], ENV)
    cell = Cell.objects.get(version=version, variant="clean", seed=0)
    assert (cell.error, cell.captured) == ("bad\\x00 \\udcff", "out\\x00put\n")
