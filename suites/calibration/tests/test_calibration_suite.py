"""The calibration suite end to end on short runs: both tracks, the judge's checks of a
calibrator's probabilities (each bad output a typed failure), temperature scaling by the
judge, shift curves, reliability bins, and the CLI's per-track tables."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from harness.runner.sandboxed import run_cells_sandboxed
from suites.calibration import metrics as cal
from suites.calibration import pipeline
from suites.calibration.probabilities import problem
from tests.conftest import cli_environment

SUITE = get_suite("calibration").shortened(2)
SEEDS = [0, 1]
# One seed per member chunk (not 5), for single-seed tests that compare no number with a
# run at the suite's chunk: asking for seed 0 then trains one member, not five.
SINGLE = dataclasses.replace(SUITE, chunk=1)


def run(objective, variant="digits", seeds=SEEDS):
    return run_cells(SUITE, objective, [variant], seeds)


def module(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return load_objective(str(path))


# --- the judge's check of probabilities ----------------------------------------------


@pytest.mark.parametrize("bad, words", [
    (np.full((3, 2), np.nan), "non-finite"),
    (np.array([[1.2, -0.2], [0.5, 0.5], [0.5, 0.5]]), "outside [0, 1]"),
    (np.array([[0.3, 0.3], [0.5, 0.5], [0.5, 0.5]]), "do not sum to 1"),
    (np.ones((2, 2)) / 2, "shape [2, 2]"),
    (np.array([[1, 0], [0, 1], [1, 0]]), "floating point"),
])
def test_bad_probabilities_are_named(bad, words):
    assert words in problem(bad, (3, 2))


def test_good_probabilities_pass():
    p = cal.softmax(np.random.default_rng(0).normal(size=(50, 10)).astype(np.float32))
    assert problem(p.astype(np.float32), (50, 10)) == ""


# --- training track ------------------------------------------------------------------


def test_training_track_metrics_are_the_judges():
    results = run(load_objective("ce"))
    assert [r.status for r in results] == ["ok", "ok"], [r.error for r in results]
    r = results[0]
    names = {m.name for m in SUITE.metrics}
    assert set(r.metrics) == names  # every declared metric, post-TS ones included
    assert r.info["track"] == "training"
    for k in ("ece", "ece_ts", "mce", "adaece", "classwise_ece", "accuracy"):
        assert 0 <= r.metrics[k] <= 1
    assert r.metrics["temperature"] > 0
    # Temperature scaling by the judge minimizes validation NLL, so it rarely hurts NLL on
    # test much; on these tiny runs it must at least produce a valid, different number.
    assert r.metrics["nll_ts"] != r.metrics["nll"]
    assert len(r.curves["train_loss"]) == 2
    assert r.curves["noise_levels"] == [0.5, 1.0, 2.0]
    assert len(r.curves["ece_vs_noise"]) == 3 and len(r.curves["ece_vs_dropout"]) == 3
    assert np.mean(r.curves["ece_vs_noise"] + r.curves["ece_vs_dropout"]) == \
        pytest.approx(r.metrics["ece_shift"])
    counts = r.curves["bin_count"]
    assert len(counts) == 15 and sum(counts) == 400  # every digits test sample in a bin


def test_reliability_bins_agree_with_ece():
    rng = np.random.default_rng(1)
    probs = cal.softmax(rng.normal(size=(500, 4)) * 3)
    labels = rng.integers(0, 4, 500)
    bins = pipeline.reliability(probs, labels)
    count = np.array(bins["bin_count"])
    conf, acc = np.array(bins["bin_confidence"]), np.array(bins["bin_accuracy"])
    full = count > 0
    ece = float((count[full] / 500 * np.abs(acc[full] - conf[full])).sum())
    assert ece == pytest.approx(cal.ece(probs, labels), abs=1e-12)
    assert np.isnan(conf[~full]).all()


# --- post-hoc track ------------------------------------------------------------------


def test_identity_calibrator_equals_the_reference():
    """A post-hoc objective trains the reference's model: identity on it is ce's numbers."""
    ce = run(load_objective("ce"))
    identity = run(load_objective("identity"))
    for a, b in zip(ce, identity, strict=True):
        assert b.info["track"] == "post-hoc"
        for k in ("ece", "nll", "accuracy", "ece_shift", "brier"):
            assert b.metrics[k] == pytest.approx(a.metrics[k], abs=1e-6)
        assert "ece_ts" not in b.metrics  # the judge's TS is for training objectives


def test_temperature_calibrator_matches_the_judges_temperature():
    # both at one chunk size, one member each
    ce = run_cells(SINGLE, load_objective("ce"), ["synthetic"], [0])[0]
    ts = run_cells(SINGLE, load_objective("temperature"), ["synthetic"], [0])[0]
    assert ts.metrics["ece"] == pytest.approx(ce.metrics["ece_ts"], abs=1e-4)


BAD = {
    "nan": "torch.full((len(test_logits), test_logits.shape[1]), float('nan'))",
    "negative": "test_logits.softmax(-1) * 2 - test_logits.softmax(-1).max(-1, keepdim=True)"
                ".values",
    "unnormalized": "test_logits.softmax(-1) * 0.5",
    "shape": "test_logits.softmax(-1)[:, :3]",
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_calibrator_output_is_a_typed_failure(tmp_path, kind):
    obj = module(tmp_path, f"bad_{kind}", f"""\
        import torch


        def posthoc_calibration(val_logits, val_targets, test_logits):
            return {BAD[kind]}
        """)
    results = run(obj, seeds=[0])
    assert [(r.status, r.reason) for r in results] == [("failed", "invalid-output")]
    assert "posthoc_calibration" in results[0].error or "test_probs" in results[0].error
    assert results[0].metrics == {}


def test_calibrator_that_raises_fails_with_its_message(tmp_path):
    obj = module(tmp_path, "raises", """\
        def posthoc_calibration(val_logits, val_targets, test_logits):
            raise ValueError("cannot fit this")
        """)
    [r] = run(obj, seeds=[0])
    assert (r.status, r.reason) == ("failed", "objective")
    assert "cannot fit this" in r.error


def test_validator_names_a_bad_calibrator(tmp_path):
    from harness.objectives.validate import validate

    path = tmp_path / "halves.py"
    path.write_text("def posthoc_calibration(val_logits, val_targets, test_logits):\n"
                    "    return test_logits.softmax(-1) * 0.5\n")
    problems = [p for p in validate(str(path)).problems if p.severity == "error"]
    assert problems and "do not sum to 1" in problems[0].message


@pytest.mark.slow
def test_sandboxed_calibrator_gives_the_in_process_numbers():
    code = ("def posthoc_calibration(val_logits, val_targets, test_logits):\n"
            "    t = 1.7\n"
            "    return (test_logits / t).softmax(-1)\n")
    pair = dataclasses.replace(SUITE, chunk=2)  # both runs: two members, two processes
    sandboxed = run_cells_sandboxed(pair, code, "t17.py", {}, ["digits"], SEEDS)
    assert [r.status for r in sandboxed] == ["ok", "ok"], [r.error for r in sandboxed]
    ce = run_cells(pair, load_objective("ce"), ["digits"], SEEDS)
    for s, c in zip(sandboxed, ce, strict=True):
        assert s.metrics["accuracy"] == pytest.approx(c.metrics["accuracy"], abs=1e-9)
        assert s.metrics["ece"] != pytest.approx(c.metrics["ece"], abs=1e-6)
    bad = run_cells_sandboxed(SINGLE, code.replace("softmax(-1)", "softmax(-1) * 3"),
                              "t17x3.py", {}, ["digits"], [0])
    assert [(r.status, r.reason) for r in bad] == [("failed", "invalid-output")]


# --- CLI ------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_prints_a_table_per_track(tmp_path):
    env = cli_environment(tmp_path / "home")
    # --workers 1: the tables are the point, not the process pool (tests/client/test_cli.py's)
    cmd = [sys.executable, "-m", "harness.cli", "run", "suite", "calibration", "-o", "focal3",
           "-o", "temperature", "--variants", "digits", "--seeds", "2", "--epochs", "2",
           "--workers", "1"]
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "digits · training objectives" in out.stdout
    assert "digits · post-hoc calibrators on CE" in out.stdout
    assert "lower is better" in out.stdout
    again = subprocess.run([*cmd, "--json"], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)  # every cell stored: only the tables
    assert again.returncode == 0, again.stderr
    res = again
    tables = json.loads(res.stdout)["variants"]
    training = {r["objective"] for r in tables["digits · training objectives"]}
    posthoc = {r["objective"] for r in tables["digits · post-hoc calibrators on CE"]}
    assert training == {"ce", "focal3"} and posthoc == {"ce", "temperature"}


# --- pages ----------------------------------------------------------------------------


def _store(slug: str, track: str, eces: list[float]) -> None:
    import hashlib

    from harness.storage import store
    from harness.storage.models import Objective, ObjectiveVersion

    suite = get_suite("calibration")
    obj = Objective.objects.create(slug=slug, name=slug, is_builtin=True)
    code = f"# {slug}\n"
    sha = hashlib.sha256(code.encode()).hexdigest()
    version = ObjectiveVersion.objects.create(objective=obj, code=code, code_sha256=sha,
                                              hyperparameters={}, key=sha, label=slug)
    metrics = {m.name: 0.5 for m in suite.metrics}
    results = [pipeline.CellResult("synthetic", seed, "ok", {**metrics, "ece": e}, {},
                                   info={"track": track}) for seed, e in enumerate(eces)]
    store.store_results(version, suite, results, {"device": "cpu"})


@pytest.mark.django_db
def test_suite_page_shows_tracks_lower_is_better_first(client):
    _store("ce", "training", [0.14, 0.15, 0.13])
    _store("focal3", "training", [0.05, 0.04, 0.06])
    _store("temperature", "post-hoc", [0.03, 0.04, 0.035])
    html = client.get("/suites/calibration/?variant=synthetic").content.decode()
    assert ">Track</th>" in html
    assert "post-hoc calibrators on CE" in html and "training objectives" in html
    order = [html.index(f'href="/objectives/{s}/"') for s in ("temperature", "focal3", "ce")]
    assert order == sorted(order)  # lowest ECE first
    headers = re.findall(r"<th [^>]*>([^<]*)", html.split('id="variant-table"')[1]
                         .split("</thead>")[0])
    assert "ECE TS" not in " ".join(headers)  # the other metrics are a table of their own
    others = re.findall(r"<th [^>]*>([^<]*)", html.split('id="secondary-table"')[1]
                        .split("</thead>")[0])
    assert "ECE TS" in " ".join(others) and "Brier" not in " ".join(others)


# --- opt-in CIFAR-10 ------------------------------------------------------------------


def test_cifar10_variant_runs_both_tracks_on_fixture_files(tmp_path):
    """The real-data variant reads CIFAR-10's python pickles (fixture files in that
    format), splits 10% of the training set off for validation, trains the ResNet and is
    judged like the embedded variants."""
    from harness.data.real import DatasetMissing
    from suites.calibration import data
    from tests.engine.test_real_data import make_cifar10

    with pytest.raises(DatasetMissing, match="--download"):
        data.cifar10(str(tmp_path))
    make_cifar10(tmp_path, per_batch=40, n_test=30)
    splits = data.cifar10(str(tmp_path))
    assert splits.x_train.shape == (180, 3, 32, 32) and splits.x_val.shape == (20, 3, 32, 32)
    assert np.bincount(splits.y_val, minlength=10).tolist() == [2] * 10  # stratified
    assert SUITE.variant("cifar10").queue == "gpu" and not SUITE.variant("cifar10").default
    for name in ("ce", "temperature"):  # one ResNet per run, not a chunk of five
        results = run_cells(SINGLE, load_objective(name), ["cifar10"], [0],
                                   data_root=str(tmp_path))
        assert [r.status for r in results] == ["ok"], [r.error for r in results]
        assert sum(results[0].curves["bin_count"]) == 30


@pytest.mark.slow
def test_calibrator_that_takes_too_long_times_out():
    from dataclasses import replace

    from harness.sandbox.process import Limits

    code = ("import time\n\n\n"
            "def posthoc_calibration(val_logits, val_targets, test_logits):\n"
            "    time.sleep(600)\n"
            "    return test_logits.softmax(-1)\n")
    # One member (one sandboxed process), its fork server started by a prompt calibrator
    # first (a cold start takes seconds): a warm run reaches the calibrator in about 0.5 s,
    # so 5 s of wall clock are spent in its sleep.
    prompt = code.replace("time.sleep(600)", "pass")
    assert run_cells_sandboxed(SINGLE, prompt, "prompt.py", {}, ["digits"], [0])[0].status == "ok"
    limits = replace(Limits.for_run(SINGLE, 1, 1), wall_seconds=5)
    [r] = run_cells_sandboxed(SINGLE, code, "sleeper.py", {}, ["digits"], [0], limits=limits)
    assert (r.status, r.reason) == ("timeout", "wall"), r.error
    assert r.metrics == {}
