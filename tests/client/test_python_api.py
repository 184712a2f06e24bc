"""The Python API (harness.api): capturing a notebook function as an objective file, runs
that return tables, tidy frames and figures, stored results, paired comparisons, and the
errors a notebook user gets. Runs are real (2-epoch smoke runs on the test database)."""

from __future__ import annotations

import functools
import importlib.util
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import log_softmax as lsm

from harness import api
from harness.capture import capture
from harness.objectives.loading import ObjectiveError, load_objective
from tests.conftest import cli_environment

TAU = 2.0
NAMES = ("a", "b")
LOGITS = torch.tensor([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-2.0, 4.0, 0.0]])
TARGETS = torch.tensor([0, 0, 2])


def _clip(x, tau):
    return x.clamp(max=tau)


def truncated(logits, targets, *, tau: float = TAU):
    """Cross-entropy clipped at tau nats."""
    nll = -lsm(logits, -1).gather(-1, targets[:, None]).squeeze(-1)
    return _clip(nll, tau) + 0 * len(NAMES)


def scaled_ce(logits, targets, *, scale: float = 1.0):
    """CE of scaled logits."""
    return F.cross_entropy(logits * scale, targets, reduction="none")


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"captured_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- capture -------------------------------------------------------------------------


def test_a_captured_function_computes_what_the_original_does(tmp_path):
    captured = capture(truncated, hook="classification_loss", directory=tmp_path)
    text = captured.source
    assert captured.path == tmp_path / captured.path.parent.name / "truncated.py"
    assert captured.path.read_text() == text
    # what it uses from this module, and only that
    assert "from torch.nn.functional import log_softmax as lsm" in text
    assert "TAU = 2.0" in text and "NAMES = ('a', 'b')" in text
    assert "def _clip(x, tau):" in text and text.index("def _clip") < text.index("def truncated")
    assert "classification_loss = truncated" in text
    assert "import torch.nn.functional as F" not in text and "LOGITS" not in text
    module = _module(captured.path)
    expected = truncated(LOGITS, TARGETS)
    assert torch.equal(module.classification_loss(LOGITS, TARGETS), expected)
    # and the loader sees an objective named after the function, hook and default included
    obj = load_objective(str(captured.path))
    assert (obj.name, list(obj.hooks), dict(obj.defaults)) == (
        "truncated", ["classification_loss"], {"tau": 2.0})
    assert obj.description == "Cross-entropy clipped at tau nats."


def test_one_text_is_one_file_and_a_new_text_a_new_one(tmp_path):
    first = capture(scaled_ce, hook="classification_loss", directory=tmp_path)
    again = capture(scaled_ce, hook="classification_loss", directory=tmp_path)
    assert again.path == first.path and again.source == first.source
    assert "import torch.nn.functional as F" in first.source
    other = capture(truncated, hook="classification_loss", directory=tmp_path)
    assert other.path.parent != first.path.parent


def _outer():
    k = 2.0

    def classification_loss(logits, targets):
        return F.cross_entropy(logits * k, targets)
    return classification_loss


WEIGHTS = torch.ones(3)


def uses_a_tensor(logits, targets):
    return F.cross_entropy(logits, targets, weight=WEIGHTS)


@functools.lru_cache
def decorated(logits, targets):
    return F.cross_entropy(logits, targets)


@pytest.mark.parametrize("fn, message", [
    (lambda logits, targets: logits.sum(), "a lambda cannot be captured"),
    (_outer(), "classification_loss is a closure over k of an enclosing function"),
    (uses_a_tensor, "uses WEIGHTS, a Tensor from the notebook that cannot be written"),
    (decorated, "is not a Python function (a _lru_cache_wrapper)"),
    (len, "is not a Python function (a builtin_function_or_method)"),
])
def test_what_has_no_faithful_text_is_refused_with_a_reason(tmp_path, fn, message):
    with pytest.raises(ObjectiveError, match=message.replace("(", r"\(").replace(")", r"\)")):
        capture(fn, directory=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_a_function_named_after_no_hook_needs_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    with pytest.raises(api.HarnessError, match="not named after a hook"):
        api.objective_spec(scaled_ce)
    with pytest.raises(api.HarnessError, match="no hook 'loss'"):
        api.objective_spec(scaled_ce, hook="loss")
    # a suite with one hook names it; a suite with two does not
    assert api.objective_spec(scaled_ce, suite=api._suite("noisy-labels", None)).endswith(
        "/scaled_ce.py")
    with pytest.raises(api.HarnessError, match="classification_loss, posthoc_calibration"):
        api.objective_spec(scaled_ce, suite=api._suite("calibration", None))


def test_validate_reports_a_function_and_a_broken_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    good = api.validate(scaled_ce, hook="classification_loss")
    # a function captured from a notebook declares no SEARCH_SPACE: said, not an error
    assert good.ok and [p.code for p in good.problems] == ["search-space"]
    assert str(good).endswith("OK: scaled_ce — classification_loss(scale=1.0)")

    def classification_loss(logits, targets):
        return logits.argmax(-1).float()  # no gradient reaches the logits

    bad = api.validate(classification_loss)
    assert not bad.ok and "FAILED" in str(bad)
    closure = api.validate(_outer())
    assert not closure.ok and "closure over k" in str(closure)
    assert api.validate(scaled_ce, hook="classification_loss",
                        hyperparameters={"scale": 2}).objective.hyperparameters == {
        "scale": 2.0}


# --- runs, results, comparisons --------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: api.run("no-such-suite"), "no suite 'no-such-suite'"),
    (lambda: api.run("noisy-labels", "ce", variants=["sym-0.9"]), "sym-0.9"),
    (lambda: api.run("noisy-labels", "ce", variants=["held-out"]), "held-out: held out"),
    (lambda: api.run("noisy-labels", ["ce", "gce"], hyperparameters={"q": 0.5}),
     "hyperparameters apply to one objective"),
    (lambda: api.run("noisy-labels", "gce", seeds=0), "seeds must be at least 1"),
    (lambda: api.run("noisy-labels", "gce", seeds=[-1]), "seeds are integers from 0"),
    (lambda: api.run("noisy-labels", "gce", epochs=0), "epochs must be at least 1"),
    (lambda: api.run("noisy-labels", "gce", device="tpu"), "device is cpu, cuda or cuda:N"),
    (lambda: api.run("noisy-labels", "gce", row_order_from="http://x"), "needs sandbox"),
    (lambda: api.run("noisy-labels", "gce", factorial=1), "factorial needs 2 to"),
    (lambda: api.run("calibration", "gce", factorial=2), "declares no seed streams"),
    (lambda: api.run("tta", "gce"), "but the tta suite runs only objectives defining"),
    (lambda: api.run("noisy-labels", "gce", tuned=True, factorial=2), "drop --factorial"),
    (lambda: api.run("calibration", "temperature", tuned=True),
     "tunes objectives defining classification_loss; not: temperature"),
    (lambda: api.run("noisy-labels", "gce", tuned=True, hyperparameters={"q": 0.5}),
     "drop --set for a tuned run"),
    (lambda: api.compare("ce", "gce", suite="nope"), "no suite 'nope'"),
])
def test_bad_requests_are_clear_errors_before_anything_trains(db, call, message):
    from harness.storage.models import Cell

    with pytest.raises(api.HarnessError, match=message):
        call()
    assert not Cell.objects.exists()


def test_a_tuned_run_on_a_suite_without_a_tuned_protocol_says_which_have_one(db, monkeypatch):
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")  # the one suite without one
    with pytest.raises(api.HarnessError, match="declares no tuned protocol.*noisy-labels"):
        api.run("fake-regression", "mse", tuned=True)
    with pytest.raises(api.HarnessError, match="has a tuned protocol"):
        api.profile("mse", suites=["fake-regression"], tuned=True, progress=False)


def test_unknown_hyperparameter_is_the_loaders_error(db):
    with pytest.raises(ObjectiveError, match="unknown hyperparameter 'w'"):
        api.run("noisy-labels", "gce", hyperparameters={"w": 1}, epochs=2)


@pytest.mark.slow
def test_a_run_gives_tables_frames_and_figures(db, tmp_path, monkeypatch):
    from harness.storage.models import Cell, Metric

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    notes = []
    res = api.run("noisy-labels", scaled_ce, variants=["sym-0.4"], seeds=3, epochs=2,
                  hyperparameters={"scale": 0.5}, workers=1, progress=False,
                  say=notes.append)
    assert [v.label for v in res.versions] == ["ce", "scaled_ce(scale=0.5)"]
    assert any("held out" in n for n in notes) is False  # variants were chosen
    # the summary is the CLI's JSON, row for row
    summary = res.summary()
    report = res.to_json()["variants"]["sym-0.4"]
    assert list(summary["objective"]) == [r["objective"] for r in report]
    # every declared metric for scripts, and which of them the terminal's table shows
    assert set(report[0]["secondary"]) == {m.name for m in res.suite.metrics} - {"test_acc"}
    assert res.to_json()["displayed"]["sym-0.4"] == list(res.suite.table_columns[:2])
    for (_, row), r in zip(summary.iterrows(), report, strict=True):
        assert row["mean"] == pytest.approx(r["mean"]) and row["seeds"] == 3
        assert row["ci_low"] < row["mean"] < row["ci_high"]
    ours = summary.set_index("objective").loc["scaled_ce(scale=0.5)"]
    assert ours["improvement"] == pytest.approx(
        ours["mean"] - summary.set_index("objective").loc["ce", "mean"])
    # tidy: one row per cell and metric, the stored values
    tidy = res.to_pandas()
    assert list(tidy.columns) == ["objective", "version", "suite", "suite_version",
                                  "variant", "seed", "metric", "value", "status"]
    acc = tidy[(tidy.metric == "test_acc") & (tidy.objective == "scaled_ce")]  # its name
    stored = {c.seed: Metric.objects.get(cell=c, name="test_acc").value
              for c in Cell.objects.filter(version=res.versions[1])}
    assert dict(zip(acc.seed, acc.value, strict=True)) == stored
    assert math.isclose(acc.value.mean(), ours["mean"])
    assert set(tidy.status) == {"ok"} and set(tidy.suite_version) == {"1.0+e2"}
    # stored results read back the same, and a second run trains nothing
    again = api.run("noisy-labels", scaled_ce, variants=["sym-0.4"], seeds=3, epochs=2,
                    hyperparameters={"scale": 0.5}, workers=1, progress=False,
                    say=notes.append)
    assert notes[-1] == "6 cells already stored (rerun them with --force, or force=True)"
    assert again.to_json() == res.to_json()
    read = api.results("noisy-labels", [scaled_ce], epochs=2)
    assert read.summary().equals(api.results("noisy-labels", "scaled_ce(scale=0.5)",
                                             epochs=2).summary())
    with pytest.raises(api.HarnessError, match="no stored results of 'nope'"):
        api.results("noisy-labels", "nope", epochs=2)
    # paired comparison: the web compare page's numbers
    versus = api.compare(scaled_ce, "ce", suite="noisy-labels", epochs=2)
    frame = versus.to_pandas()
    assert list(frame.variant) == ["sym-0.4"] and frame.pairs[0] == 3
    assert frame.difference[0] == pytest.approx(ours["improvement"])
    # figures: plotly objects of the pages' plots, for these objectives
    strip = res.figure("strip")
    assert type(strip).__name__ == "Figure"
    assert sorted(t.name.rstrip(" ★") for t in strip.data) == ["ce", "scaled_ce(scale=0.5)"]
    shown = sorted(v for t in strip.data if t.name.startswith("scaled") for v in t.x)
    assert shown == pytest.approx(sorted(100 * v for v in stored.values()))  # % as tables
    assert res.figure("curves").data and versus.figure().data
    with pytest.raises(ValueError, match="no figure 'pie'"):
        res.figure("pie")
    with pytest.raises(ValueError, match="declares no reliability diagram"):
        res.figure("reliability")


@pytest.mark.slow
def test_interrupting_a_notebook_run_keeps_finished_groups_and_the_kernel(tmp_path):
    """■ in Jupyter: the kernel gets SIGINT while a group trains; the finished group stays
    stored, the interrupted one is discarded whole, the kernel lives on and a rerun
    trains only what is missing."""
    import sqlite3

    from jupyter_client.manager import start_new_kernel

    env = cli_environment(tmp_path / "home")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    database = tmp_path / "home" / "harness.sqlite3"

    def stored() -> list[tuple]:
        try:
            con = sqlite3.connect(database, timeout=30)
            try:
                return con.execute("SELECT v.label, c.status FROM webapp_cell c JOIN "
                                   "webapp_objectiveversion v ON c.version_id = v.id").fetchall()
            finally:
                con.close()
        except sqlite3.OperationalError:
            return []

    try:
        setup = kc.execute_interactive(
            "import time\nimport torch.nn.functional as F\nfrom harness import api\n"
            "def slow(logits, targets):\n"
            "    time.sleep(0.25)\n"
            "    return F.cross_entropy(logits, targets, reduction='none')\n", timeout=120)
        assert setup["content"]["status"] == "ok"
        # slow trains for a minute or more: the interrupt lands mid-group even on a loaded
        # machine, where seeing ce land can take seconds
        # stop_on_error=False: else the kernel answers "aborted" to whatever arrives just after
        # the interrupt's error (Jupyter's queue abort), the liveness check below included
        msg_id = kc.execute("api.run('noisy-labels', slow, variants=['sym-0.4'], seeds=2, "
                            "epochs=20, workers=1, progress=False)", stop_on_error=False)
        deadline = time.monotonic() + 240
        while len(stored()) < 2 and time.monotonic() < deadline:  # ce's group landed
            time.sleep(0.2)
        assert sorted(stored()) == [("ce", "ok"), ("ce", "ok")]
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=120)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=120)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "Interrupted"
        assert sorted(stored()) == [("ce", "ok"), ("ce", "ok")]  # slow's group: discarded
        alive = kc.execute_interactive("1 + 1", timeout=60)
        assert alive["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_cli_calls_the_api_for_run_results_and_validate():
    """The CLI is a thin layer: its verbs call harness.api, and no second run path."""
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(["git", "grep", "-n", "-E", r"api\.(run|results|validate)\(",
                            "--", "harness/cli.py"], cwd=root, capture_output=True,
                           text=True).stdout
    assert {"api.run(", "api.results(", "api.validate("} <= {
        part for part in ("api.run(", "api.results(", "api.validate(") if part in found}
    cli = (root / "harness" / "cli.py").read_text()
    for engine in ("run_groups", "prepare_fixtures", "store_results", "variant_tables"):
        assert engine not in cli, f"the CLI calls {engine} itself"


def test_importing_the_api_is_light():
    code = ("import sys; from harness import api; "
            "print(sorted(m for m in ('torch', 'django', 'pandas', 'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


SCRIPT = """from harness import api

api.run("fake-regression", ["mse"], seeds=2, workers=2, progress=False)
print("ran")
"""


def test_a_script_calling_the_api_without_a_main_guard_runs_and_is_told_why_on_one_core(
        tmp_path):
    """Workers re-run the parent's script when they start: unguarded, each would start the
    run again (BrokenProcessPool). The run stays in the script's process and says what to
    write; under the guard nothing is said."""
    from tests.engine.test_fake_suite import _env

    script = tmp_path / "my_script.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], env=_env(tmp_path), cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ran" in out.stdout and "BrokenProcessPool" not in out.stderr
    assert f"{script} calls the harness at its top level" in out.stdout
    assert 'Put the call under that `if`' in out.stdout


def test_a_call_under_the_main_guard_is_recognised(tmp_path):
    from harness.runner.processes import _guarded

    script = tmp_path / "guarded.py"
    script.write_text("import x\n\nif '__main__' == __name__:\n    x.run()\n\nx.run()\n")
    assert _guarded(str(script), 4) and not _guarded(str(script), 6)
