"""Over 500 lines on purpose: the verbs share one CLI run, made once per module.

End to end: the real `harness` command in subprocesses, on the embedded SQLite default.

Every run uses the smoke-run protocol (``--epochs 2``, stored as suite version
"1.0+e2") with few seeds and variants; nothing is mocked. The database is read
directly with ``sqlite3`` at ``$HARNESS_HOME/harness.sqlite3``.

Each command costs seconds before it trains (torch, migrations, a worker pool), so the
tests share one trained home (``shared``) where they can, and pass ``--workers 1`` (train
in the CLI's own process) where the worker pool is not what they test: the shared run,
Ctrl-C and the killed run keep it exercised.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.contract import registry
from harness.contract.registry import get_suite
from tests.conftest import cli_environment

CLI = [sys.executable, "-m", "harness.cli"]
SMOKE = "1.0+e2"
FINAL = ("ok", "diverged", "failed", "timeout")
MAIN_RUN = ["run", "suite", "noisy-labels", "-o", "gce", "--variants", "sym-0.4", "clean",
            "--seeds", "2", "--epochs", "2"]
IN_PROCESS = ["--workers", "1"]  # no worker pool to start: not what the test is about
NO_RESULTS = "no stored results for noisy-labels yet"


def harness(*args: str, env: dict[str, str], cwd: Path,
            timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def strict_json(text: str):
    """json.loads that refuses NaN/Infinity, which are not JSON."""
    def reject(token: str):
        raise ValueError(f"not valid JSON: {token}")
    return json.loads(text, parse_constant=reject)


def query(env: dict[str, str], sql: str, *params, missing_ok: bool = False) -> list[tuple]:
    path = Path(env["HARNESS_HOME"]) / "harness.sqlite3"
    if not path.exists():
        assert missing_ok, f"no embedded database at {path}: did the run use another one?"
        return []
    con = sqlite3.connect(path, timeout=30)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def cells(env: dict[str, str], missing_ok: bool = False) -> list[dict]:
    rows = query(env, """
        SELECT c.id, v.label, c.variant, c.seed, c.status, c.suite_version, c.attempts,
               c.finished_at, c.error, c.diverged_step
        FROM webapp_cell c JOIN webapp_objectiveversion v ON c.version_id = v.id
        ORDER BY c.id""", missing_ok=missing_ok)
    keys = ("id", "label", "variant", "seed", "status", "suite_version", "attempts",
            "finished_at", "error", "diverged_step")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def env(cli_env) -> dict[str, str]:
    return cli_env


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One home holding the 8 cells of MAIN_RUN (trained once, over the worker pool, for
    several tests), and ``pristine``: a copy of it as that run left it, for a test that
    changes its cells in a home of its own (tests run in any order)."""
    root = tmp_path_factory.mktemp("shared")
    env = cli_environment(root / "home")
    proc = harness(*MAIN_RUN, "--json", env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr
    pristine = root / "pristine-home"
    shutil.copytree(root / "home", pristine)
    return SimpleNamespace(env=env, cwd=root, proc=proc, cells=cells(env), pristine=pristine)


@pytest.fixture(scope="module")
def table(shared) -> subprocess.CompletedProcess:
    """MAIN_RUN's human-readable tables, asked again once every cell is stored."""
    proc = harness(*MAIN_RUN, env=shared.env, cwd=shared.cwd)
    assert proc.returncode == 0, proc.stderr
    return proc


def first_run_cells(env: dict[str, str]) -> list[dict]:
    return [c for c in cells(env) if c["label"] in ("ce", "gce")
            and c["suite_version"] == SMOKE and c["variant"] in ("sym-0.4", "clean")]


# --- ls ------------------------------------------------------------------------------


def test_ls_lists_variants_and_builtins_without_torch(env, tmp_path):
    code = ("import sys; from harness.cli import main; rc = main(['ls']); "
            "print('TORCH', 'torch' in sys.modules); print('RC', rc)")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for v in get_suite("noisy-labels").variants:
        assert v.name in out
    builtins = registry.builtins()
    assert len(builtins) == 55  # 21 classification losses, 5 certified, 8 post-hoc
    # calibrators, 8 test-time adaptation baselines, 13 unlearning objectives
    for name, builtin in builtins.items():
        assert f"  {name} " in out
        if builtin.suite:  # a suite's own baseline says whose it is
            assert f"[{builtin.suite}]" in out.split(f"  {name} ", 1)[1].splitlines()[0]
    for suite in registry.all_suites():
        assert f"baselines: {', '.join(suite.baselines)}" in out
    assert "TORCH False" in out
    assert "RC 0" in out


# --- run suite -----------------------------------------------------------------------


@pytest.mark.slow
def test_run_json_stores_every_cell(shared):
    report = strict_json(shared.proc.stdout)  # progress and notes went to stderr
    assert report["suite_version"] == SMOKE
    assert list(report["variants"]) == ["sym-0.4", "clean"]
    for rows in report["variants"].values():
        assert {r["objective"] for r in rows} == {"gce", "ce"}  # ce added as the reference
        assert all(r["seeds"] == 2 and r["diverged"] == 0 and r["failed"] == 0 for r in rows)
        gce = next(r for r in rows if r["objective"] == "gce")
        assert gce["p_improvement"] is not None

    stored = shared.cells
    assert len(stored) == 8
    assert {(c["label"], c["variant"], c["seed"]) for c in stored} == {
        (o, v, s) for o in ("ce", "gce") for v in ("sym-0.4", "clean") for s in (0, 1)}
    assert all(c["status"] == "ok" and c["suite_version"] == SMOKE and c["attempts"] == 1
               and c["diverged_step"] is None for c in stored)

    for c in stored:
        metrics = dict(query(shared.env, "SELECT name, value FROM webapp_metric "
                                         "WHERE cell_id = ?", c["id"]))
        assert {"test_acc", "best_test_acc", "noise_rate", "train_acc_clean"} <= set(metrics)
        assert 0.0 <= metrics["test_acc"] <= 1.0
        if c["variant"] == "sym-0.4":
            assert {"memorization", "correction"} <= set(metrics)
            assert metrics["noise_rate"] == pytest.approx(0.4)
        else:
            assert metrics["noise_rate"] == 0.0
        curves = {name: json.loads(values) for name, values in query(
            shared.env, 'SELECT name, "values" FROM webapp_curve WHERE cell_id = ?', c["id"])}
        assert set(curves) >= {"test_acc", "train_loss", "grad_norm"}
        assert all(len(curves[k]) == 2 for k in ("test_acc", "train_loss", "grad_norm"))


@pytest.mark.slow
def test_a_rerun_of_one_seed_reproduces_its_stored_cell_exactly(shared, tmp_path):
    """Asked alone, seed 1 trains in its member chunk as it did beside the others (gce has
    the op that once made the grouping matter: docs/reproducibility.md): first in the
    shared run (2 variants × 2 seeds, over the worker pool), then alone, in a copy of
    that home."""
    env = cli_environment(tmp_path / "home")
    shutil.copytree(shared.pristine, tmp_path / "home")

    def stored(seed: int) -> tuple[dict, dict, dict, int]:
        (cell_id, environment, attempts), = query(
            env, "SELECT c.id, c.environment, c.attempts FROM webapp_cell c JOIN "
                 "webapp_objectiveversion v ON c.version_id = v.id WHERE v.label = 'gce' AND "
                 "c.variant = 'sym-0.4' AND c.seed = ?", seed)
        metrics = dict(query(env, "SELECT name, value FROM webapp_metric WHERE cell_id = ?",
                             cell_id))
        curves = dict(query(env, 'SELECT name, "values" FROM webapp_curve WHERE cell_id = ?',
                            cell_id))
        return metrics, curves, json.loads(environment), attempts

    before = stored(1)
    again = harness("run", "suite", "noisy-labels", "-o", "gce", "--variants", "sym-0.4",
                    "--seed", "1", "--force", "--epochs", "2", *IN_PROCESS, env=env,
                    cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = stored(1)
    assert after[3] == 2 and stored(0)[3] == 1  # seed 1 alone was rerun and stored again
    assert after[:2] == before[:2]  # every metric and curve, exactly
    assert after[2]["chunk"] == before[2]["chunk"] == {"size": 5, "index": 0}
    bad = harness("run", "suite", "noisy-labels", "--seed", "-1", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "a seed is an integer from 0" in bad.stderr


@pytest.mark.slow
def test_rerun_skips_stored_cells_and_force_reruns_them(shared):
    before = {c["id"]: c for c in first_run_cells(shared.env)}
    assert len(before) == 8

    again = harness(*MAIN_RUN, "--json", env=shared.env, cwd=shared.cwd)
    assert again.returncode == 0, again.stderr
    assert "8 cells already stored" in again.stderr
    strict_json(again.stdout)
    after = {c["id"]: c for c in first_run_cells(shared.env)}
    assert after.keys() == before.keys()
    for cid, c in after.items():
        assert c["attempts"] == 1
        assert c["finished_at"] == before[cid]["finished_at"]

    forced = harness(*MAIN_RUN, "--force", "--json", *IN_PROCESS, env=shared.env,
                     cwd=shared.cwd)
    assert forced.returncode == 0, forced.stderr
    assert "already stored" not in forced.stderr
    rerun = {c["id"]: c for c in first_run_cells(shared.env)}
    assert rerun.keys() == before.keys()  # replaced in place, never duplicated
    assert all(c["attempts"] == 2 and c["status"] == "ok" for c in rerun.values())
    assert all(c["finished_at"] != before[cid]["finished_at"] for cid, c in rerun.items())


def test_human_readable_table(table):
    out = table.stdout
    assert "already stored" in out
    assert "noisy-labels v1.0+e2 · sym-0.4" in out
    assert "noisy-labels v1.0+e2 · clean" in out
    for text in ("ce (ref)", "gce", "P(>ce)", "mean [95% CI]"):
        assert text in out


@pytest.mark.slow
def test_across_variants_table_names_the_worst_variant(shared, table):
    suite = get_suite("noisy-labels")
    acc: dict[tuple[str, str], list[float]] = {}
    for label, variant, value in query(shared.env, """
            SELECT v.label, c.variant, m.value FROM webapp_metric m
            JOIN webapp_cell c ON m.cell_id = c.id
            JOIN webapp_objectiveversion v ON c.version_id = v.id
            WHERE m.name = 'test_acc' AND c.suite_version = ?""", SMOKE):
        acc.setdefault((label, variant), []).append(value)
    means = {k: sum(x) / len(x) for k, x in acc.items()}
    report = strict_json(shared.proc.stdout)["across_variants"]
    assert report["variants"] == ["sym-0.4", "clean"] and report["left_out"] == []
    out = table.stdout.split("· across variants ·", 1)[1]
    for label in ("gce", "ce"):
        per = {v: means[(label, v)] for v in ("sym-0.4", "clean")}
        worst = min(per, key=per.get)  # higher test accuracy is better
        row = next(r for r in report["rows"] if r["objective"] == label)
        assert row["worst_variant"] == worst and row["means"] == pytest.approx(per)
        head = suite.headline_metric
        line = next(x for x in out.splitlines() if f" {label} " in x)
        assert head.format(sum(per.values()) / 2) in line
        assert f"{head.format(per[worst])} ({worst})" in line
    assert "mean over 2 variants" in out and "left out" not in out


def test_across_variants_leaves_out_incomplete_objectives_and_says_so(capsys):
    from harness.report.tables import CellRow, across_variants
    from harness.terminal import render_across

    rows = [CellRow(o, v, s, "ok", {"rmse": x}) for o, v, s, x in (
        ("mse", "clean", 0, 0.5), ("mse", "clean", 1, 0.7), ("mse", "noisy", 0, 1.1),
        ("huber", "clean", 0, 0.4), ("huber", "noisy", 0, 0.8), ("huber", "noisy", 1, 0.9),
        ("partial", "clean", 0, 0.1), ("partial", "noisy", 0, float("nan")))]
    across, left_out = across_variants(rows, ["clean", "noisy"], headline="rmse",
                                       higher_is_better=False, reference="mse")
    assert left_out == ["partial"]  # no finite value on noisy
    assert [r.objective for r in across] == ["huber", "mse"]  # lower mean first
    huber, mse = across
    assert huber.means == pytest.approx({"clean": 0.4, "noisy": 0.85})
    assert (huber.worst_variant, huber.worst) == ("noisy", pytest.approx(0.85))
    assert mse.mean == pytest.approx(0.85) and mse.is_reference
    higher, _ = across_variants(rows, ["clean", "noisy"], headline="rmse",
                                higher_is_better=True)
    assert [r.objective for r in higher] == ["mse", "huber"]
    assert higher[0].worst_variant == "clean"  # the smallest mean when higher is better

    suite = get_suite("noisy-labels")
    render_across(suite, ["clean", "noisy"], across, left_out)
    out = capsys.readouterr().out
    head = suite.headline_metric
    assert "across variants" in out and "mean over 2 variants" in out
    assert f"{head.format(0.85)} (noisy)" in out and "mse (ref)" in out
    assert "left out (no result on every shown variant): partial" in out


def test_syntax_error_in_objective_file(env, tmp_path):
    write(tmp_path / "broken.py", """\
        def classification_loss(logits, targets:
            return logits.sum(-1)
        """)
    proc = harness("run", "suite", "noisy-labels", "-o", "broken.py", "--variants", "clean",
                   "--seeds", "1", "--epochs", "2", env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "syntax error in broken.py at line" in proc.stderr
    assert "harness validate" in proc.stderr
    assert cells(env, missing_ok=True) == []
    assert query(env, "SELECT id FROM webapp_objective WHERE slug = 'broken'",
                 missing_ok=True) == []


def test_unknown_hyperparameter_lists_known_ones(env, tmp_path):
    proc = harness("run", "suite", "noisy-labels", "-o", "gce", "--set", "nope=1",
                   "--variants", "clean", "--seeds", "1", "--epochs", "2",
                   env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown hyperparameter 'nope'" in proc.stderr
    assert "this objective has: q" in proc.stderr
    assert cells(env, missing_ok=True) == []


def test_objective_that_raises_is_stored_as_failed(env, tmp_path):
    write(tmp_path / "failing.py", """\
        import torch.nn.functional as F


        def classification_loss(logits, targets, *, progress):
            if progress > 0.3:
                raise RuntimeError("custom failure 42")
            return F.cross_entropy(logits, targets, reduction="none")
        """)
    proc = harness("run", "suite", "noisy-labels", "-o", "failing.py", "--variants", "sym-0.4",
                   "--seeds", "2", "--epochs", "2", *IN_PROCESS, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # a failure is a result, not a crash
    assert "failing: 2 cells did not finish (failed: objective)" in proc.stdout
    assert "custom failure 42" in proc.stdout

    stored = cells(env)
    failed = [c for c in stored if c["label"] == "failing"]
    assert len(failed) == 2
    for c in failed:
        assert c["status"] == "failed"
        assert "RuntimeError: custom failure 42" in c["error"]
        assert 'raise RuntimeError("custom failure 42")' in c["error"]  # the user's line
        assert "failing.py" in c["error"]
    assert query(env, "SELECT COUNT(*) FROM webapp_metric WHERE cell_id IN "
                          f"({','.join(str(c['id']) for c in failed)})") == [(0,)]
    assert sorted(c["status"] for c in stored if c["label"] == "ce") == ["ok", "ok"]


def test_nan_loss_is_stored_as_diverged(env, tmp_path):
    write(tmp_path / "nan_late.py", """\
        import torch.nn.functional as F


        def classification_loss(logits, targets, *, progress):
            loss = F.cross_entropy(logits, targets, reduction="none")
            if progress > 0.5:
                return loss * float("nan")
            return loss
        """)
    proc = harness("run", "suite", "noisy-labels", "-o", "nan_late.py", "--variants", "sym-0.4",
                   "--seeds", "2", "--epochs", "2", "--json", *IN_PROCESS, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nan_late: 2 seeds diverged" in proc.stderr
    rows = {r["objective"]: r for r in strict_json(proc.stdout)["variants"]["sym-0.4"]}
    assert rows["nan_late"]["diverged"] == 2
    assert rows["nan_late"]["seeds"] == 0
    assert rows["nan_late"]["mean"] is None  # no finished seed: null, not NaN
    assert rows["ce"]["diverged"] == 0 and rows["ce"]["seeds"] == 2

    diverged = [c for c in cells(env) if c["label"] == "nan_late"]
    assert len(diverged) == 2
    steps_per_epoch = 16  # 1000 training samples, batch 64
    for c in diverged:
        assert c["status"] == "diverged"
        # first step with progress > 0.5, in the second of two epochs
        assert c["diverged_step"] is not None
        assert steps_per_epoch <= c["diverged_step"] < 2 * steps_per_epoch
        names = {n for (n,) in query(env, "SELECT name FROM webapp_metric "
                                              "WHERE cell_id = ?", c["id"])}
        assert "test_acc" not in names  # a frozen model's accuracy is not a result


def test_set_stores_a_separate_labelled_version(shared):
    proc = harness("run", "suite", "noisy-labels", "-o", "gce", "--set", "q=0.5",
                   "--variants", "clean", "--seeds", "2", "--epochs", "2", "--json",
                   env=shared.env, cwd=shared.cwd)
    assert proc.returncode == 0, proc.stderr
    assert "2 cells already stored" in proc.stderr  # ce's, from the shared run
    rows = strict_json(proc.stdout)["variants"]["clean"]
    assert {r["objective"] for r in rows} == {"ce", "gce(q=0.5)"}

    versions = query(shared.env, """
        SELECT v.label, v.hyperparameters, v.key FROM webapp_objectiveversion v
        JOIN webapp_objective o ON v.objective_id = o.id WHERE o.slug = 'gce'""")
    by_label = {label: (json.loads(hp), key) for label, hp, key in versions}
    assert set(by_label) == {"gce", "gce(q=0.5)"}
    assert by_label["gce"][0] == {"q": 0.7}
    assert by_label["gce(q=0.5)"][0] == {"q": 0.5}
    assert by_label["gce"][1] != by_label["gce(q=0.5)"][1]
    new = [c for c in cells(shared.env) if c["label"] == "gce(q=0.5)"]
    assert sorted((c["variant"], c["seed"], c["status"]) for c in new) == [
        ("clean", 0, "ok"), ("clean", 1, "ok")]


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _session(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ...
        if entry.name.isdigit() and int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _left_over(sid: int, wait: float = 20) -> list[int]:
    deadline = time.monotonic() + wait
    while (pids := _session(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pids


def _start_slow_run(env, tmp_path) -> subprocess.Popen:
    """`harness run` of ce and an objective that sleeps in its hook, once ce is stored (each
    in a process of the worker pool)."""
    write(tmp_path / "slow.py", """\
        import time

        import torch.nn.functional as F


        def classification_loss(logits, targets):
            if targets.shape[-1] > 8:  # training's batches, not the validator's
                time.sleep(5)
            return F.cross_entropy(logits, targets, reduction="none")
        """)
    proc = subprocess.Popen(
        # 2 epochs: ce trains in a second, slow.py would sleep 160 s, far past any load.
        [*CLI, "run", "suite", "noisy-labels", "-o", "slow.py", "--variants", "sym-0.4",
         "--seeds", "2", "--epochs", "2", "--json"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # As from a terminal: a shell without job control (CI) starts background commands
        # with SIGINT ignored, and Python then never raises KeyboardInterrupt. Its own
        # session lets the cleanup kill whatever it started.
        preexec_fn=_interruptible, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if len([c for c in cells(env, True) if c["label"] == "ce"]) == 2:
                    break
            except sqlite3.OperationalError:  # not migrated yet, or locked by the writer
                pass
            time.sleep(0.1)
        assert proc.poll() is None, f"exited early: {proc.communicate()}"
        assert len([c for c in cells(env) if c["label"] == "ce"]) == 2, "ce never stored"
    except BaseException:
        _kill_session(proc)
        raise
    return proc


def _kill_session(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and every process of its session (workers hold its pipes open)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a grandchild outside the session: stop reading
        pass


@pytest.mark.slow
def test_ctrl_c_keeps_finished_groups_only(env, tmp_path):
    proc = _start_slow_run(env, tmp_path)  # SIGINT surely lands while slow.py trains
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        left = _left_over(proc.pid)  # an interrupted run leaves no worker training on
    finally:
        _kill_session(proc)
    assert left == []
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert out == ""  # no tables after an interrupt
    stored = cells(env)
    assert sorted((c["label"], c["seed"]) for c in stored) == [("ce", 0), ("ce", 1)]
    assert all(c["status"] in FINAL for c in stored)
    assert query(env, "SELECT COUNT(*) FROM webapp_cell WHERE status NOT IN "
                          "('ok', 'diverged', 'failed', 'timeout')") == [(0,)]


@pytest.mark.slow
def test_killed_run_leaves_no_worker(env, tmp_path):
    # SIGKILL gives the CLI no chance to clean up: its workers must notice on their own.
    proc = _start_slow_run(env, tmp_path)
    try:
        assert len(_session(proc.pid)) >= 3  # the CLI, its fork server and workers
        proc.kill()
        proc.wait(timeout=30)
        left = _left_over(proc.pid)
    finally:
        _kill_session(proc)
    assert left == [], "workers outlived the killed run"


# --- new objective, validate ---------------------------------------------------------


def test_new_objective_then_validate(env, tmp_path):
    proc = harness("new", "objective", "my_loss", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "my_loss.py"
    assert path.is_file()
    assert "wrote my_loss.py" in proc.stdout
    text = path.read_text()

    ok = harness("validate", "my_loss.py", env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK: my_loss" in ok.stdout

    again = harness("new", "objective", "my_loss", env=env, cwd=tmp_path)
    assert again.returncode == 2
    assert "exists; not overwriting" in again.stderr
    assert path.read_text() == text

    write(tmp_path / "bad_sig.py", """\
        def classification_loss(logits):
            return logits.logsumexp(-1)
        """)
    bad = harness("validate", "bad_sig.py", env=env, cwd=tmp_path)
    assert bad.returncode == 1
    assert "classification_loss must take (logits, targets)" in bad.stdout
    assert "it takes (logits)" in bad.stdout
    assert "FAILED: bad_sig.py" in bad.stdout


# --- results -------------------------------------------------------------------------


def test_results_on_empty_home(env, tmp_path):
    proc = harness("results", "noisy-labels", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert NO_RESULTS in proc.stdout


def test_results_never_show_smoke_runs(shared):
    # Only the real protocol's suite version ("1.0") is shown: smoke runs stay apart.
    assert shared.cells  # the home does hold "1.0+e2" cells
    proc = harness("results", "noisy-labels", env=shared.env, cwd=shared.cwd)
    assert proc.returncode == 0, proc.stderr
    assert NO_RESULTS in proc.stdout


def test_missing_real_dataset_is_a_clear_error_not_a_traceback(env, tmp_path):
    proc = harness("run", "suite", "noisy-labels", "-o", "ce", "--variants", "mnist/sym-0.4",
                   "--seeds", "1", "--epochs", "1", "--data-root", str(tmp_path / "data"),
                   env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "--download" in proc.stderr and str(tmp_path / "data") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sandbox_flag_trains_files_like_the_workers_do(env, tmp_path):
    # Peeks once training starts (batches of 64): the validator's batches of 8 pass, as a
    # submission the server queued would (one that peeks there is refused before a run:
    # tests/sandbox/test_cli_sandbox.py).
    write(tmp_path / "peeking.py", """\
        import torch.nn.functional as F


        def classification_loss(logits, targets):
            if targets.shape[-1] > 8:
                print("about to peek")
                open("/etc/passwd").read()
            return F.cross_entropy(logits, targets)
        """)
    write(tmp_path / "honest.py", """\
        import torch.nn.functional as F


        def classification_loss(logits, targets):
            return F.cross_entropy(logits, targets, reduction="none")
        """)
    common = ["--variants", "sym-0.4", "--seeds", "2", "--epochs", "2", *IN_PROCESS]
    proc = harness("run", "suite", "noisy-labels", "-o", "peeking.py", "-o", "honest.py",
                   *common, "--sandbox", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "peeking: 2 cells did not finish (killed: violation)" in proc.stdout
    assert "sandbox: reading /etc/passwd is not allowed" in proc.stdout
    assert "about to peek" in proc.stdout  # its captured output, shown to its runner
    by_label = {}
    for c in cells(env):
        by_label.setdefault(c["label"], []).append(c["status"])
    assert by_label["peeking"] == ["killed", "killed"]
    assert by_label["honest"] == ["ok", "ok"]
    sandboxed = query(env, "SELECT m.value FROM webapp_metric m JOIN webapp_cell c ON "
                      "m.cell_id = c.id JOIN webapp_objectiveversion v ON c.version_id = v.id "
                      "WHERE v.label = 'honest' AND m.name = 'test_acc' ORDER BY c.seed")
    again = harness("run", "suite", "noisy-labels", "-o", "honest.py", *common, "--force",
                    env=env, cwd=tmp_path)  # in-process this time: the same numbers
    assert again.returncode == 0, again.stderr
    assert query(env, "SELECT m.value FROM webapp_metric m JOIN webapp_cell c ON "
                 "m.cell_id = c.id JOIN webapp_objectiveversion v ON c.version_id = v.id "
                 "WHERE v.label = 'honest' AND m.name = 'test_acc' ORDER BY c.seed") == sandboxed
