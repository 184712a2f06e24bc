"""The test-time adaptation suite end to end on digits-C: the prototype's findings hold,
fixtures are built once and named in every record, every bad output is a typed failure
with a clear message, and the sandbox serves both hooks with the same numbers."""

from __future__ import annotations

import copy
import dataclasses
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness.contract import chunks
from harness.contract.pipeline import InvalidOutput, TrainOutput
from harness.contract.registry import get_suite, pipeline
from harness.data import fixtures
from harness.objectives.loading import ObjectiveError, load_objective
from harness.runner.inprocess import run_cells
from harness.runner.sandboxed import run_cells_sandboxed
from tests.conftest import cli_environment

SUITE = get_suite("tta")
SEEDS = [0, 1, 2]
# Two seeds per member chunk (not 5), for tests comparing two runs at that same chunk size.
PAIR = dataclasses.replace(SUITE, chunk=2)

# A built-in's cells, by (name, variant, seed): a run trains its seeds' whole member chunks
# (harness/contract/chunks.py), whose cells are the same whatever was asked for, so the tests of
# this module share them (the page test stores cells the finding tests ran).
_CELLS: dict[tuple[str, str, int], object] = {}


def run(objective, variant="iid", seeds=SEEDS):
    if not isinstance(objective, str):
        return run_cells(SUITE, objective, [variant], seeds)
    missing = [s for s in seeds if (objective, variant, s) not in _CELLS]
    if missing:
        every = [s for c in chunks.covering(variant, missing, SUITE.chunk) for s in c.seeds]
        for r in run_cells(SUITE, load_objective(objective), [variant], every):
            _CELLS[objective, variant, r.seed] = r
    return [copy.deepcopy(_CELLS[objective, variant, s]) for s in seeds]


def module(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


def metric(results, name):
    assert all(r.status == "ok" for r in results), [(r.status, r.error) for r in results]
    return np.array([r.metrics[name] for r in results])


# --- what the prototype measured ----------------------------------------------------


def test_tent_beats_the_source_model_on_iid_gaussian_noise_on_every_seed():
    source = metric(run("source"), "error_gaussian_noise")
    tent = metric(run("tent"), "error_gaussian_noise")
    bn = metric(run("bn_stats"), "error_gaussian_noise")
    assert (tent < source).all(), (tent, source)
    assert abs(tent.mean() - bn.mean()) < 0.02  # TENT ≈ BN statistics at this scale


def test_on_class_correlated_streams_bn_collapses_and_lame_is_best():
    errors = {name: metric(run(name, "correlated"), "online_error")
              for name in ("source", "bn_stats", "tent", "lame")}
    assert (errors["bn_stats"] > errors["source"] + 0.2).all(), errors
    assert (errors["tent"] > errors["source"] + 0.2).all(), errors
    assert (errors["lame"] < errors["source"]).all(), errors
    assert min(errors, key=lambda k: errors[k].mean()) == "lame"


def test_small_batches_break_batch_statistics():
    """Batches of 4: BN statistics lose their iid gain and fall below the source model."""
    source = metric(run("source", "small-batch"), "online_error")
    bn = metric(run("bn_stats", "small-batch"), "online_error")
    bn_64 = metric(run("bn_stats", "iid"), "online_error")
    assert (bn > source).all(), (bn, source)
    assert (bn > bn_64 + 0.1).all(), (bn, bn_64)


def test_every_metric_comes_from_the_judge_and_fits_its_definition():
    results = run("tent", "gradual", seeds=[0])
    r = results[0]
    assert r.status == "ok"
    assert {f"error_severity_{s}" for s in range(1, 6)} <= set(r.metrics)
    # Severity 5 is harder than severity 1 for the same model.
    assert r.metrics["error_severity_5"] > r.metrics["error_severity_1"]
    errors = [r.metrics[f"error_{c}"] for c in
              ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
               "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
               "elastic_transform", "pixelate", "jpeg_compression")]
    assert all(0 <= e <= 1 for e in errors)
    assert "heldout_error" not in r.metrics  # only the iid scenario streams them
    assert r.metrics["updated"] == 1.0 and r.metrics["resets"] == 0
    curve = r.curves["online_error_curve"]
    assert len(curve) == len(r.curves["window_batches"]) <= 100
    iid = run("source", "iid", seeds=[0])[0]
    assert 0 <= iid.metrics["heldout_error"] <= 1


# --- fixtures ------------------------------------------------------------------------


def test_every_result_names_the_fixtures_it_started_from():
    results = run("source", seeds=[0, 1])
    keys = [r.info["fixtures"] for r in results]
    assert keys[0]["pool"] == keys[1]["pool"]
    assert keys[0]["source_model"] != keys[1]["source_model"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", k["source_model"]) for k in keys)
    model = fixtures.load(SUITE, "source_model", 1)
    assert not model.built and model.key == keys[1]["source_model"]


def test_the_cli_builds_fixtures_once_and_reuses_them(tmp_path):
    """A cache holding the digits-C pool and the source models of seeds 0-3 (copied from
    this session's, so that they are not built again here): the first run of 2 seeds
    reuses those five and builds the rest of their whole member chunk, seed 4, which
    nobody asked for (harness/contract/chunks.py); the second reuses all six."""
    import shutil

    copied = [("digits_c", fixtures.load(SUITE, "digits_c"))]
    copied += [("source_model", fixtures.load(SUITE, "source_model", s)) for s in range(4)]
    for name, entry in copied:
        folder = tmp_path / "fixtures" / SUITE.name / name
        folder.mkdir(parents=True, exist_ok=True)
        for suffix in (".npz", ".json"):
            shutil.copy(fixtures.root() / SUITE.name / name / f"{entry.key}{suffix}", folder)
    env = cli_environment(tmp_path / "home")
    env["HARNESS_FIXTURES"] = str(tmp_path / "fixtures")
    command = [sys.executable, "-m", "harness.cli", "run", "suite", "tta", "-o", "source",
               "--variants", "iid", "--seeds", "2", "--force"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "fixtures: 5 reused, 1 built" in first.stdout + first.stderr
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "fixtures: 6 reused, 0 built" in second.stdout + second.stderr


# --- bad input: each a typed failure with a clear message -----------------------------


@pytest.mark.parametrize("body, words", [
    ("return probs * float('nan')", "non-finite probabilities at batch 0"),
    ("return probs - 0.5", "outside [0, 1] at batch 0"),
    ("return probs * 0.5", "do not sum to 1 at batch 0"),
    ("return probs[:, :5]", "must return probabilities of the batch's shape"),
])
def test_a_bad_adjust_output_fails_the_cell_as_invalid_output(tmp_path, body, words):
    path = module(tmp_path, "bad_adjust", f"""
        def tta_adjust(probs, features):
            {body}
    """)
    results = run(load_objective(str(path)), seeds=[0, 1])
    assert [r.status for r in results] == ["failed", "failed"]
    assert {r.reason for r in results} == {"invalid-output"}
    assert words in results[0].error


def test_a_loss_that_is_not_finite_at_the_first_batch_fails(tmp_path):
    path = module(tmp_path, "nan_loss", """
        def tta_loss(logits):
            return logits.sum() * float("nan")
    """)
    results = run(load_objective(str(path)), seeds=[0])
    assert results[0].status == "failed" and results[0].reason == "invalid-output"
    assert "not finite on the first batch" in results[0].error


def test_a_loss_that_turns_non_finite_later_diverges_at_that_batch(tmp_path):
    path = module(tmp_path, "late_nan", """
        def tta_loss(logits, *, progress):
            return -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean() / (
                progress < 0.1)
    """)
    results = run(load_objective(str(path)), "continual", seeds=[0])
    r = results[0]
    assert r.status == "diverged" and r.diverged_step is not None and r.diverged_step > 0


def test_an_objective_asking_for_the_labels_is_refused_when_loaded(tmp_path):
    path = module(tmp_path, "wants_labels", """
        def tta_loss(logits, *, labels):
            return logits.sum() * 0
    """)
    with pytest.raises(ObjectiveError, match="'labels' is not context this hook receives"):
        load_objective(str(path))


def test_an_unknown_step_option_fails_with_its_name(tmp_path):
    path = module(tmp_path, "typo", """
        MODEL = {"normalisation": "source"}
        def tta_adjust(probs, features):
            return probs
    """)
    r = run(load_objective(str(path)), seeds=[0])[0]
    assert r.status == "failed" and "MODEL['normalisation'] is not an option" in r.error


def test_a_classification_loss_is_not_a_test_time_objective(tmp_path, cli_env):
    assert not SUITE.supports(load_objective("ce").hooks)
    out = subprocess.run([sys.executable, "-m", "harness.cli", "run", "suite", "tta", "-o",
                          "ce", "--seeds", "1"], env=cli_env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0
    assert ("ce defines classification_loss, but the tta suite runs only objectives "
            "defining tta_loss or tta_adjust") in out.stderr


def test_the_judge_refuses_arrays_of_the_wrong_shape():
    steps = pipeline(SUITE)
    job = steps.prepare(SUITE, [SUITE.variant("iid")], [0])[0]
    out = steps.train(SUITE, load_objective("source"), job.inputs, job.plan)
    out.arrays["probs"] = out.arrays["probs"][:, :10]
    with pytest.raises(InvalidOutput, match="probs"):
        steps.judge(SUITE, job, out)
    with pytest.raises(InvalidOutput, match="probs"):
        steps.judge(SUITE, job, TrainOutput({}, {}))
    out = steps.train(SUITE, load_objective("source"), job.inputs, job.plan)
    out.arrays["diverged"] = np.array([len(job.plan["batches"])])
    with pytest.raises(InvalidOutput, match="outside the stream"):
        steps.judge(SUITE, job, out)
    out.arrays["diverged"] = out.arrays["diverged"].astype(np.float32)
    with pytest.raises(InvalidOutput, match="diverged: expected integer"):
        steps.judge(SUITE, job, out)


def test_the_trainer_never_receives_the_stream_labels():
    steps = pipeline(SUITE)
    job = steps.prepare(SUITE, [SUITE.variant("correlated")], [0, 1])[0]
    labels = job.private.labels
    for name, value in job.inputs.items():
        assert value.dtype.kind == "f" or name == "where", name
    # What the trainer may index with: pool rows and images, never a class.
    assert job.inputs["where"].shape == (*labels.shape, 2)
    assert not np.array_equal(job.inputs["where"][..., 1] % 10, labels)


# --- the sandbox serves both hooks --------------------------------------------------


@pytest.mark.parametrize("name", ["tent", "lame", "eata"])
def test_the_sandbox_gives_the_in_process_numbers(name):
    from harness.contract.registry import builtins

    code = builtins()[name].path.read_text()
    sandboxed = run_cells_sandboxed(PAIR, code, f"{name}.py", {}, ["iid"], [0, 1])
    local = run_cells(PAIR, load_objective(name), ["iid"], [0, 1])
    for a, b in zip(sandboxed, local, strict=True):
        assert a.status == b.status == "ok", (a.status, a.error)
        assert a.metrics["online_error"] == pytest.approx(b.metrics["online_error"], abs=2e-3)
        assert "sandbox" in a.info


# --- the pages ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_suite_and_objective_pages_show_the_scenarios_own_numbers(client):
    """Real cells of source and TENT on iid and gradual: the suite page's columns are
    those with a value in the shown scenario (errors per severity only on gradual), the
    heatmap has a column per corruption, the objective page draws the stream's error."""
    import json as jsonlib

    from harness.storage import store
    from harness.storage.models import ObjectiveVersion

    for name in ("source", "tent"):
        version = store.version_for(load_objective(name))
        store.store_results(version, SUITE, [*run(name, "iid", [0]), *run(name, "gradual", [0])],
                              {"device": "cpu"})

    def page(url):
        response = client.get(url)
        assert response.status_code == 200
        return response.content.decode()

    def headers(html):  # the variant table's and its other metrics' table's
        found = []
        for table_id in ("variant-table", "secondary-table"):
            if f'id="{table_id}"' in html:
                table = html.split(f'id="{table_id}"', 1)[1].split("</thead>", 1)[0]
                found += re.findall(r"<th[^>]*>([^<]*)", table)
        return found

    gradual = headers(page("/suites/tta/?variant=gradual"))
    assert "sev 1 (%)" in gradual and "sev 5 (%)" in gradual and "clean (%)" in gradual
    assert not any(h.startswith("gauss") for h in gradual)  # per corruption: the heatmap
    iid_html = page("/suites/tta/?variant=iid")
    iid = headers(iid_html)
    assert "held-out (%)" in iid and not any(h.startswith("sev ") for h in iid)
    heat = jsonlib.loads(re.search(r'<script[^>]*id="heatmap-data"[^>]*>(.*?)</script>',
                                   iid_html, re.S).group(1))["data"][0]
    assert len(heat["x"]) == 15 and heat["y"] == ["tent", "source"]
    slug = ObjectiveVersion.objects.filter(objective__name="tent").get().objective.slug
    objective_html = page(f"/objectives/{slug}/")
    assert "online error along the stream" in objective_html
