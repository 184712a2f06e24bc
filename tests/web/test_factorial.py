"""Factorial runs: the CLI's --factorial mode end to end, their storage apart from the
replicate seeds, and the suite page's "where the seed variance comes from" section."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.contrib.auth.models import User

from harness.contract import seeding
from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.report.variance import FACTORS, complete_grid, decompose
from harness.storage import store
from harness.storage.models import Cell, FactorialCell, Objective, ObjectiveVersion
from tests.client.test_cli import IN_PROCESS, harness, query, strict_json
from webapp.leaderboard.factorial import variance_sources

RUN = ["run", "suite", "noisy-labels", "-o", "ce", "--variants", "sym-0.4", "--epochs", "2",
       *IN_PROCESS]


def test_factorial_run_stores_every_combination_apart_and_its_diagonal_is_the_plain_seed(
        cli_env, tmp_path):
    proc = harness(*RUN, "--factorial", "2", "--json", env=cli_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = strict_json(proc.stdout)
    (row,) = report["rows"]
    d = row["decomposition"]
    assert row["objective"] == "ce" and row["cells"] == 8
    assert d["levels"] == {"init": 2, "order": 2, "noise": 2}
    assert [s["source"] for s in d["sources"]] == ["init", "order", "noise", "interactions"]
    assert sum(s["share"] for s in d["sources"]) == pytest.approx(1.0)
    stored = query(cli_env, "SELECT init, \"order\", noise, status, metrics "
                            "FROM webapp_factorialcell ORDER BY init, \"order\", noise")
    assert [r[:3] for r in stored] == [(i, j, k) for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    assert {r[3] for r in stored} == {"ok"}
    assert query(cli_env, "SELECT count(*) FROM webapp_cell") == [(0,)]  # not replicates
    # The decomposition printed is that of the stored scores.
    acc = {r[:3]: json.loads(r[4])["test_acc"] for r in stored}
    grid = complete_grid(acc, ("init", "order", "noise"))
    again = decompose(grid, FACTORS)
    assert [s.share for s in again.sources] == pytest.approx([s["share"] for s in d["sources"]])

    # A plain run: seed s trains exactly as the factorial cell (s, s, s).
    plain = harness(*RUN, "--seeds", "2", "--json", env=cli_env, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    seeds = dict(query(cli_env, "SELECT c.seed, m.value FROM webapp_cell c JOIN webapp_metric m "
                                "ON m.cell_id = c.id WHERE m.name = 'test_acc'"))
    assert seeds[0] == acc[(0, 0, 0)] and seeds[1] == acc[(1, 1, 1)]
    assert len(set(acc.values())) > 1  # the off-diagonal cells are other trainings

    rerun = harness(*RUN, "--factorial", "2", env=cli_env, cwd=tmp_path)
    assert rerun.returncode == 0 and "8 cells already stored" in rerun.stdout + rerun.stderr
    assert "init share" in rerun.stdout and "label-noise draw" in rerun.stdout


@pytest.mark.parametrize("extra, message", [
    (["--factorial", "2", "--seeds", "3"], "drop --seeds"),
    (["--factorial", "1"], "2 to 999 levels"),
])
def test_factorial_options_are_checked(cli_env, tmp_path, extra, message):
    proc = harness(*RUN, *extra, env=cli_env, cwd=tmp_path)
    assert proc.returncode != 0 and message in proc.stderr
    assert query(cli_env, "SELECT count(*) FROM webapp_factorialcell", missing_ok=True) in (
        [], [(0,)])


def test_a_suite_without_seed_streams_refuses_a_factorial_run(cli_env, tmp_path):
    proc = harness("run", "suite", "calibration", "--factorial", "2", "--epochs", "1",
                   env=cli_env, cwd=tmp_path)
    assert proc.returncode != 0 and "declares no seed streams" in proc.stderr


# --- storage and the page ----------------------------------------------------------------


def _version(slug: str, *, private: bool = False) -> ObjectiveVersion:
    owner = User.objects.create(username=f"u-{slug}") if private else None
    obj = Objective.objects.create(slug=slug, name=slug, owner=owner,
                                   visibility=Objective.PRIVATE if private else Objective.PUBLIC)
    return ObjectiveVersion.objects.create(objective=obj, code="", code_sha256="", key=slug,
                                           label=slug)


def _store(version, variant, scores: dict[tuple[int, int, int], float], status="ok"):
    suite = get_suite("noisy-labels")
    results = [CellResult(variant, seeding.factorial_seed(*k), status, {"test_acc": v})
               for k, v in scores.items()]
    store.store_factorial(version, suite, results, {"device": "cpu"})


def _grid(rng, n=3):
    return {(i, j, k): float(0.8 + 0.02 * i + 0.005 * j + rng.normal(0, 0.003))
            for i in range(n) for j in range(n) for k in range(n)}


@pytest.mark.django_db
def test_page_section_decomposes_public_objectives_and_keeps_replicate_tables_clean(client):
    rng = np.random.default_rng(0)
    scores = _grid(rng)
    _store(_version("init-heavy"), "sym-0.4", scores)
    _store(_version("secret", private=True), "sym-0.4", _grid(rng))
    holes = _grid(rng)
    holes[(0, 0, 1)] = None
    _store(_version("holey"), "sym-0.4", {k: v for k, v in holes.items() if v is not None})
    _store(_version("elsewhere"), "clean", _grid(rng))

    section = variance_sources("noisy-labels", "sym-0.4")
    rows = {r["objective"]: r for r in section["rows"]}
    assert set(rows) == {"init-heavy", "holey"}  # the private one is not shown
    assert rows["holey"]["decomposition"] is None and rows["holey"]["cells"] == 26
    d = rows["init-heavy"]["decomposition"]
    expected = decompose(complete_grid(scores, FACTORS), FACTORS)
    assert d["grid"] == "3×3×3"
    assert [s["share"] for s in d["sources"]] == [s.share for s in expected.sources]
    assert d["sources"][0]["share"] > 0.8  # init dominates by construction
    assert section["elsewhere"] == ["clean"]

    page = client.get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert 'id="variance-sources"' in page and 'id="variance-table"' in page
    assert "init-heavy" in page and "incomplete grid (26 cells)" in page
    assert "secret" not in page
    assert f'{100 * expected.sources[0].share:.0f}%' in page
    # factorial cells are no replicate seeds: no table has them
    assert Cell.objects.count() == 0
    assert "No results for sym-0.4 yet" in page


@pytest.mark.django_db
def test_storing_a_plain_seed_as_factorial_is_refused_and_a_rerun_replaces_a_cell():
    version = _version("x")
    suite = get_suite("noisy-labels")
    with pytest.raises(ValueError, match="not a factorial seed"):
        store.store_factorial(version, suite, [CellResult("sym-0.4", 3, "ok",
                                                            {"test_acc": 0.5})], {})
    assert FactorialCell.objects.count() == 0
    _store(version, "sym-0.4", {(0, 1, 2): 0.5})
    _store(version, "sym-0.4", {(0, 1, 2): 0.6})
    (cell,) = FactorialCell.objects.all()
    assert cell.metrics == {"test_acc": 0.6} and (cell.init, cell.order, cell.noise) == (0, 1, 2)


@pytest.mark.django_db
def test_a_failed_cell_breaks_the_grid():
    version = _version("y")
    scores = _grid(np.random.default_rng(1), n=2)
    _store(version, "sym-0.4", scores)
    _store(version, "sym-0.4", {(1, 1, 1): 0.1}, status="diverged")
    values = store.factorial_scores(get_suite("noisy-labels"), "sym-0.4", "test_acc")[version]
    assert values[(1, 1, 1)] is None
    assert complete_grid(values, FACTORS) is None
