"""A new suite is its folder plus one registry line: the fake suite in tests/fake_suite/
(lower-is-better non-percent headline, two hooks of its own, a non-epoch curve, a
reliability diagram) goes through the validator, the CLI (in-process, over worker
processes and in the sandbox), storage, every page, the JSON API and the exports, with
no edit anywhere else. Registered the way a plugin is: ``HARNESS_SUITES``."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from harness.runner.inprocess import run_cells
from tests.conftest import cli_environment

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "tests.fake_suite"
NAME = "fake-regression"
CLI = [sys.executable, "-m", "harness.cli"]
ENV = {"python": "test", "device": "cpu"}

MEDIAN_HUBER = '''"""Huber loss with a median post-hoc shift (a user's file)."""
import torch.nn.functional as F

SEARCH_SPACE = {"delta": {"low": 0.1, "high": 2.0, "log": True}}


def regression_loss(pred, target, *, delta: float = 0.5, progress):
    return F.huber_loss(pred, target, reduction="none", delta=delta) * (1 + 0 * progress)


def posthoc_shift(val_pred, val_target, test_pred):
    return test_pred - (val_pred - val_target).median()
'''


@pytest.fixture
def registered(monkeypatch):
    """The fake suite registered in this process, as HARNESS_SUITES does for a plugin."""
    monkeypatch.setenv("HARNESS_SUITES", PACKAGE)
    from harness.contract import registry
    return registry.get_suite(NAME)


def _env(tmp_path: Path) -> dict[str, str]:
    env = cli_environment(tmp_path / "home")
    env["HARNESS_SUITES"] = PACKAGE
    env["PYTHONPATH"] = str(ROOT)  # where tests.fake_suite imports from, as a plugin's path
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_no_code_outside_its_folder_names_the_fake_suite():
    names = (NAME, "fake_suite", "regression_loss", "posthoc_shift")
    found = subprocess.run(["git", "grep", "-l", "-e", names[0], "-e", names[1], "-e",
                            names[2], "-e", names[3], "--", ".",
                            ":!tests", ":!docs"],  # its tests, and the docs' worked example
                           cwd=ROOT, capture_output=True, text=True)
    assert found.stdout == "", f"named outside its folder: {found.stdout}"


def test_registry_declares_its_hooks_baselines_and_plots(registered):
    from harness.contract import registry
    assert registry.suite_names()[-1] == NAME
    hooks = registry.hooks()
    assert {"regression_loss", "posthoc_shift"} <= set(hooks)
    assert registry.builtins()["huber"].suite == NAME
    assert registry.import_roots()[-1] == (PACKAGE, str(ROOT))
    assert registered.headline_metric.better == "lower"
    assert registered.headline_anchors.normalize(0.0) == 1.0
    assert registered.curve("rmse_vs_noise").x.label == "input noise σ"


def test_validate_runs_each_hooks_own_smoke_test(registered, tmp_path):
    good = tmp_path / "median_huber.py"
    good.write_text(MEDIAN_HUBER)
    env = _env(tmp_path)
    ok = _cli("validate", str(good), env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == ("OK: median_huber — regression_loss(delta=0.5); "
                                 "posthoc_shift()")
    broken = tmp_path / "broken.py"
    broken.write_text(MEDIAN_HUBER.replace("return test_pred - ", "return val_pred - "))
    bad = _cli("validate", str(broken), env=env, cwd=tmp_path)
    assert bad.returncode == 1
    assert "error: [shape] posthoc_shift returned [16]" in bad.stdout
    no_grad = tmp_path / "no_grad.py"
    no_grad.write_text("def regression_loss(pred, target):\n    return (pred * 0).sum()\n")
    bad = _cli("validate", str(no_grad), env=env, cwd=tmp_path)
    assert "error: [no-grad] regression_loss: the gradient to the predictions is zero" in \
        bad.stdout or "[no-grad]" in bad.stdout


@pytest.mark.slow
def test_cli_runs_its_baselines_and_a_file_in_and_out_of_the_sandbox(tmp_path):
    """Default run = the suite's own baselines (no classification loss joins it); a lower-is-
    better table sorts ascending and shows improvements as positive; --sandbox gives the
    same numbers as the in-process run."""
    env = _env(tmp_path)
    run = _cli("run", "suite", NAME, "--seeds", "3", "--json", env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    table = json.loads(run.stdout)
    assert table["headline_metric"]["better"] == "lower"
    assert table["headline_metric"]["unit"] == "number"
    for variant in ("clean", "out-0.2", "out-0.4"):
        rows = table["variants"][variant]
        assert {r["objective"] for r in rows} == {"mse", "huber"}
        means = [r["mean"] for r in rows]
        assert means == sorted(means)  # best (lowest RMSE) first
    huber = next(r for r in table["variants"]["out-0.4"] if r["objective"] == "huber")
    mse = next(r for r in table["variants"]["out-0.4"] if r["objective"] == "mse")
    assert huber["mean"] < mse["mean"] and huber["improvement"] > 0  # robust to outliers
    assert huber["improvement"] == pytest.approx(mse["mean"] - huber["mean"], abs=1e-9)

    human = _cli("results", NAME, env=env, cwd=tmp_path)
    assert "test RMSE (lower is better)" in human.stdout
    assert "%" not in human.stdout.split("out-0.4", 1)[1].split("\n", 3)[3][:200]

    user = tmp_path / "median_huber.py"
    user.write_text(MEDIAN_HUBER)
    # A smoke run is enough to compare: in the CLI's own process, then in the sandbox over
    # the worker pool (mse and median_huber a worker each: the CLI tests' one sandboxed run
    # over the pool)
    args = ["run", "suite", NAME, "-o", str(user), "--variants", "out-0.4", "--seeds", "2",
            "--epochs", "2", "--json"]
    plain = _cli(*args, "--workers", "1", env=env, cwd=tmp_path)
    sandboxed = _cli(*args, "--sandbox", env=_env(tmp_path / "other"), cwd=tmp_path)
    assert plain.returncode == 0 and sandboxed.returncode == 0, sandboxed.stderr
    row = [r for r in json.loads(plain.stdout)["variants"]["out-0.4"]
           if r["objective"] == "median_huber"]
    boxed = [r for r in json.loads(sandboxed.stdout)["variants"]["out-0.4"]
             if r["objective"] == "median_huber"]
    assert row and row[0]["mean"] == boxed[0]["mean"] and row[0]["seeds"] == 2


# --- storage, pages, API, exports (on the test PostgreSQL) ------------------------------


@pytest.fixture
def stored(registered, db):
    """mse and huber on the default variants, 3 seeds, trained and stored in process."""
    from harness.objectives.loading import load_objective
    from harness.storage import store

    for name in ("mse", "huber"):
        objective = load_objective(name)
        version = store.version_for(objective)
        results = run_cells(registered, objective, registered.default_variants, [0, 1, 2])
        assert {r.status for r in results} == {"ok"}
        store.store_results(version, registered, results, ENV)
    return registered


def test_storage_refuses_what_the_suite_did_not_declare(stored):
    from harness.contract.suite import CellResult
    from harness.storage import store
    from harness.storage.models import Cell, Curve, ObjectiveVersion

    cell = Cell.objects.filter(suite=NAME, variant="clean").first()
    assert set(Curve.objects.filter(cell=cell).values_list("name", flat=True)) == {
        c.name for c in stored.curves}
    version = ObjectiveVersion.objects.get(objective__slug="huber")
    with pytest.raises(ValueError, match="undeclared curve 'mystery'"):
        store.store_results(version, stored, [CellResult(
            "clean", 9, "ok", {"rmse": 1.0}, {"mystery": [1.0]})], ENV)
    with pytest.raises(ValueError, match="undeclared metric 'accuracy'"):
        store.store_results(version, stored, [CellResult(
            "clean", 9, "ok", {"accuracy": 1.0})], ENV)
    # a curve on named points holds one value per name
    from harness.contract.suite import Axis, CurveSpec

    named = replace(stored, curves=(*stored.curves, CurveSpec(
        "attacks", "after each attack", Axis("attack", ticks=("none", "relearned")))))
    with pytest.raises(ValueError, match="3 points for the 2 named on its axis"):
        store.store_results(version, named, [CellResult(
            "clean", 9, "ok", {"rmse": 1.0}, {"attacks": [1.0, 2.0, 3.0]})], ENV)
    assert not Cell.objects.filter(suite=NAME, seed=9).exists()  # nothing half-written


def _json_script(html: str, element_id: str):
    match = re.search(rf'<script id="{re.escape(element_id)}" type="application/json">'
                      rf'(.*?)</script>', html, re.S)
    assert match, f"no json_script {element_id}"
    return json.loads(match.group(1))


def test_every_page_shows_it_in_its_own_units_and_direction(stored, client):
    from webapp import leaderboard

    summary = leaderboard.suite_summary(NAME)
    huber = next(r for r in summary["rows"] if r["objective"] == "huber")
    mse = next(r for r in summary["rows"] if r["objective"] == "mse")
    assert huber["improvement"] == pytest.approx(mse["mean"] - huber["mean"])
    assert huber["improvement"] > 0 and huber["normalized"] > mse["normalized"]
    assert summary["anchors"] == [3.0, 0.0]

    home = client.get("/").content.decode()
    assert f'href="/suites/{NAME}/"' in home
    cell = leaderboard.home_table()["rows"]
    huber_row = next(r for r in cell if r["objective"] == "huber")
    assert huber_row["rank"] == 1  # complete on every default variant, best normalized score
    text = f"{huber['improvement']:+.3f}".replace("-", "−")
    assert text in home and "(lower is better) 3.000 → 0, 0.000 → 1" in home

    page = client.get(f"/suites/{NAME}/?variant=out-0.4").content.decode()
    assert "(lower is better)" in page and "RMSE <span" in page  # no (%) unit
    strip = _json_script(page, "strip-data")  # not a percent: no "(%)", not ×100
    assert strip["layout"]["xaxis"]["title"]["text"] == "test RMSE — lower is better"
    family = _json_script(page, "family-data")
    assert family["data"] and family["layout"]["xaxis"]["title"]["text"].startswith(
        "outlier share")
    table = leaderboard.variant_table(NAME, "out-0.4")
    assert [r["objective"] for r in table["rows"]] == ["huber", "mse"]
    assert [t["name"] for t in strip["data"]][1] == "mse"
    assert strip["data"][1]["x"] == list(table["rows"][1]["values"].values())

    obj = client.get("/objectives/huber/").content.decode()
    curves = _json_script(obj, f"curves-data-{NAME}")
    layout = curves["layout"]
    # a panel per drawn curve in the declared order, each on its own x axis; grids not drawn
    assert [layout[k]["title"]["text"] for k in ("yaxis", "yaxis2")] == \
        ["training loss", "test RMSE"] and "yaxis3" not in layout
    assert [layout[k]["title"]["text"] for k in ("xaxis", "xaxis2")] == \
        ["epoch", "input noise σ"]
    mean = {(t["name"], t.get("xaxis", "x")): t for t in curves["data"] if "name" in t}
    assert mean["huber mean", "x2"]["x"] == [0.0, 0.5, 1.0]  # the noise_grid it names
    assert mean["huber mean", "x"]["x"][:3] == [1, 2, 3]
    scatter = _json_script(obj, f"scatter-{NAME}-1")
    assert scatter["layout"]["xaxis"]["title"]["text"] == \
        "test mean absolute error — lower is better"  # no "(%)"
    assert scatter["layout"]["yaxis"]["title"]["text"] == "test RMSE — lower is better"
    reliability = _json_script(obj, f"reliability-{NAME}")
    bins = stored.settings["bins"]
    lines = {t["name"]: t for t in reliability["data"]}
    assert len(lines["huber"]["x"]) == len(lines["huber"]["y"]) == bins
    seeds = {k: t for k, t in lines.items() if k.startswith("huber seed ")}
    assert sorted(seeds) == ["huber seed 0", "huber seed 1", "huber seed 2"]
    assert all(t["visible"] == "legendonly" and len(t["x"]) == len(t["y"]) == bins
               for t in seeds.values())  # each seed's diagram, toggled in the legend

    compare = client.get(f"/objectives/huber/compare/?with=mse&suite={NAME}").content.decode()
    assert "Lower is better" in compare and "huber better" in compare


def test_api_and_exports_state_the_direction(stored, client):
    body = json.loads(client.get("/api/suites").content)
    fake = next(s for s in body["suites"] if s["name"] == NAME)
    assert fake["hooks"] == ["regression_loss", "posthoc_shift"]
    assert fake["metrics"][0]["better"] == "lower"
    assert fake["reliability"]["count"] == "bin_count"
    detail = json.loads(client.get(f"/api/suites/{NAME}?variant=out-0.4").content)
    rows = detail["tables"][0]["rows"]
    assert rows[0]["objective"] == "huber" and rows[0]["vs_reference"]["mean_diff"] > 0
    results = json.loads(client.get(f"/api/results?suite={NAME}&curves=1").content)
    assert results["count"] == 2 * 3 * 3
    assert "rmse_vs_noise" in results["results"][0]["curves"]

    csv_text = client.get(f"/export/{NAME}/csv?variant=out-0.4").content.decode()
    records = list(csv.DictReader(io.StringIO(csv_text)))
    huber = next(r for r in records if r["objective"] == "huber")
    assert (huber["metric"], huber["better"], huber["unit"]) == ("rmse", "lower", "number")
    assert float(huber["improvement_vs_ref"]) > 0
    tex = client.get(f"/export/{NAME}/tex").content.decode()
    assert "lower is better" in tex and "\\textbf{" in tex


def test_an_objective_without_its_hooks_cannot_run_there(registered, tmp_path):
    env = _env(tmp_path)
    out = _cli("run", "suite", NAME, "-o", "gce", "--seeds", "1", "--epochs", "1", env=env,
               cwd=tmp_path)
    assert out.returncode == 2
    assert ("gce defines classification_loss, but the fake-regression suite runs only "
            "objectives defining regression_loss or posthoc_shift") in out.stderr


def test_a_suite_missing_its_headline_anchors_fails_at_import():
    code = textwrap.dedent("""
        from harness.contract.suite import MetricSpec, Suite, SuiteError, Variant
        try:
            Suite("x", "1", "d", ("classification_loss",), "err",
                  (MetricSpec("err", "error", better="lower"),), {}, (Variant("v", {}, ""),),
                  "m:C", ("ce",))
        except SuiteError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "no normalization anchors for its headline 'err'" in out.stdout


@pytest.mark.slow
def test_a_web_submission_runs_in_the_sandbox_and_shows_on_the_run_page(
        registered, client, settings, django_user_model, django_capture_on_commit_callbacks):
    """The form offers the suite to an objective defining its hooks (and only those), the
    sandbox validates and trains it, the run page shows each cell's headline in its unit."""
    from harness.storage.models import Submission

    settings.HARNESS_EXECUTOR, settings.HARNESS_RUN_EPOCHS = "inline", 1
    client.force_login(django_user_model.objects.create_user("ann", password="ann-pass-123"))
    form = client.get("/submit/").content.decode()
    assert f'value="{NAME}"' in form and "needs regression_loss or posthoc_shift" in form
    data = {"name": "median huber", "description": "", "paper_url": "",
            "code_text": MEDIAN_HUBER, "visibility": "public", "hyperparameters": "",
            "suites": [NAME], "seeds": "2"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submit/", data)
    errors = re.findall(r"errorlist\">([^<]*)", response.content.decode())
    assert response.status_code == 302, errors
    submission = Submission.objects.get()
    state = json.loads(client.get(f"/runs/{submission.pk}/status.json").content)
    assert state["finished"] and state["counts"]["ok"] == 2 * len(registered.default_variants)
    cell = state["cells"][0]
    assert cell["headline"]["metric"] == "rmse"
    assert re.fullmatch(r"\d+\.\d{3}", cell["headline"]["text"])  # 3 decimals, no "%"
    wrong = data | {"code_text": "def classification_loss(logits, targets):\n"
                                 "    return logits.logsumexp(-1)\n"}
    refused = client.post("/submit/", wrong).content.decode()
    assert "not supported by an objective defining classification_loss" in refused
