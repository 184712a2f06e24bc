"""``harness submit`` end to end: the real CLI in subprocesses on its embedded SQLite store,
uploading to a live test server (Django's live_server on the real PostgreSQL) whose sample
runs through the real Celery task (eagerly) and the sandbox; nothing is mocked.

Plain cross-entropy (``ce``), trained locally as a user would (sandboxed, both variants
in one run; in the CLI's own process, ``--workers 1``: the worker pool is tested in
tests/client/test_cli.py) and re-run by the server as it trains a submission (one variant a job): a
cell's numbers do not depend on the job it shares (harness/contract/chunks.py), and the local run
and the server share this machine's row-order key (a real server's differs: an upload of
a position-dependent objective is then "unverifiable", naming the key;
tests/web/test_uploads.py)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User

import tasks
from harness.contract.registry import builtins
from harness.objectives.loading import read_source
from harness.runner.environment import using_threads
from harness.storage.models import Cell, Upload
from tests.client.test_cli import IN_PROCESS  # a command costs seconds already: no pool too
from tests.conftest import cli_environment
from webapp import tokens

CLI = [sys.executable, "-m", "harness.cli"]
SEEDS = 3  # noisy-labels' minimum of seeds per variant
RUN = ["run", "suite", "noisy-labels", "-o", "my_ce.py", "--seeds", str(SEEDS), "--epochs",
       "1", "--sandbox", *IN_PROCESS, "--variants"]
VARIANTS = ("clean", "sym-0.4")
SUBMIT = ["submit", "my_ce.py", "--suite", "noisy-labels", "--epochs", "1",
          "--variants", "clean", "sym-0.4"]


def harness(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """A directory with my_ce.py (the built-in ce's code under a name of its own) and
    home/, the local store after `harness run --sandbox` of it: 2 variants × 3 seeds, one
    epoch, in one run."""
    where = tmp_path_factory.mktemp("local")
    (where / "my_ce.py").write_text(read_source(Path(builtins()["ce"].path)))
    done = harness(*RUN, *VARIANTS, env=cli_environment(where / "home"), cwd=where)
    assert done.returncode == 0, done.stderr
    return where


@pytest.fixture
def server(live_server, settings, monkeypatch, transactional_db):
    """The live server as deployed, shortened to one epoch: a sample goes to the Celery task
    (run eagerly, in the server's process) and through the sandbox."""
    settings.HARNESS_RUN_EPOCHS = 1
    settings.HARNESS_EXECUTOR = "tasks.dispatch:enqueue"
    monkeypatch.setenv("HARNESS_TORCH_THREADS", "1")  # as the CLI's worker processes
    conf = tasks.app.conf
    before = conf.task_always_eager, conf.task_eager_propagates
    conf.task_always_eager, conf.task_eager_propagates = True, False
    # An eager task trains in this process: one torch thread, as a worker started with
    # HARNESS_TORCH_THREADS=1 (else the numbers may differ for a reason that is not the
    # upload's, and a tampered value would be "unverifiable" instead of a mismatch)
    with using_threads(1):
        yield live_server.url
    conf.task_always_eager, conf.task_eager_propagates = before


def submit_env(home: Path, server: str) -> dict[str, str]:
    env = cli_environment(home)
    env["HARNESS_SERVER"] = server
    env["HARNESS_TOKEN"] = tokens.create(User.objects.create_user("alice"), "laptop")[1]
    return env


@pytest.mark.slow
def test_a_local_run_submitted_is_verified_by_the_server(local_run, server, tmp_path):
    work = tmp_path / "w"
    shutil.copytree(local_run, work)
    done = harness(*SUBMIT, "--wait", env=submit_env(work / "home", server), cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: the server's re-run matched your numbers exactly" in done.stdout
    upload = Upload.objects.get()
    assert (upload.status, upload.differences, upload.reason) == (Upload.VERIFIED, [], "")
    cells = Cell.objects.filter(version=upload.version)
    assert cells.count() == 2 * SEEDS and all(c.status == Cell.OK for c in cells)
    rerun = [c for c in cells if c.worker]  # the default sample: one seed per variant
    assert sorted(c.variant for c in rerun) == sorted(VARIANTS)
    for c in rerun:  # a worker's job, sandboxed; the other cells joined as verified claims
        assert c.environment["sandbox"]["protocol"] == "loss-only"
        assert "uploaded" not in c.environment
    assert all("uploaded" in c.environment for c in cells if not c.worker)
    local = _local_values(work / "home")
    for c in cells:
        assert c.metrics.get(name="test_acc").value == local[(c.variant, c.seed)]


@pytest.mark.slow
def test_a_tampered_local_value_is_a_mismatch_naming_that_cell(local_run, server, tmp_path,
                                                               settings):
    settings.HARNESS_VERIFY_FRACTION = 1.0  # every seed: the tampered one is sure to be checked
    work = tmp_path / "w"
    shutil.copytree(local_run, work)
    original = _local_values(work / "home")[("sym-0.4", 1)]
    with sqlite3.connect(work / "home" / "harness.sqlite3") as db:
        changed = db.execute(
            "UPDATE webapp_metric SET value = value + 0.001 WHERE name = 'test_acc' AND "
            "cell_id = (SELECT c.id FROM webapp_cell c JOIN webapp_objectiveversion v ON "
            "v.id = c.version_id JOIN webapp_objective o ON o.id = v.objective_id WHERE "
            "o.slug = 'my-ce' AND c.variant = 'sym-0.4' AND c.seed = 1)").rowcount
    assert changed == 1
    done = harness(*SUBMIT, "--wait", env=submit_env(work / "home", server), cwd=work)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mismatch" in done.stdout and "differs: sym-0.4 seed 1 test_acc" in done.stdout
    upload = Upload.objects.get()
    assert upload.status == Upload.MISMATCH
    assert upload.differences == [{"variant": "sym-0.4", "seed": 1, "metric": "test_acc",
                                   "local": original + 0.001, "server": original}]
    assert Cell.objects.filter(version=upload.version).count() == 2 * SEEDS  # all re-run
    assert not Cell.objects.filter(environment__has_key="uploaded").exists()


@pytest.mark.slow
def test_submit_refuses_clearly_without_results_token_seeds_or_with_changed_code(tmp_path):
    (tmp_path / "my_ce.py").write_text(read_source(Path(builtins()["ce"].path)))
    env = cli_environment(tmp_path / "home")
    env.update(HARNESS_SERVER="http://127.0.0.1:9", HARNESS_TOKEN="oh_unused")

    def refused(*args: str, env=env) -> str:
        done = harness(*args, env=env, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        return done.stderr

    no_token = {k: v for k, v in env.items() if k != "HARNESS_TOKEN"}
    assert "no API token: make one on your account page (http://127.0.0.1:9/accounts/)" in (
        refused(*SUBMIT, env=no_token))
    assert "no such file" in refused("submit", "nope.py", "--suite", "noisy-labels")
    assert "mnist/sym-0.4 is an opt-in variant" in refused(*SUBMIT[:-2], "mnist/sym-0.4")
    assert "no local results for my_ce.py: run it first" in refused(*SUBMIT)
    few = ["run", "suite", "noisy-labels", "-o", "my_ce.py", "--seeds", "2", "--epochs", "1",
           *IN_PROCESS, "--variants", *VARIANTS]
    assert harness(*few, env=env, cwd=tmp_path).returncode == 0
    assert "too few seeds: noisy-labels needs at least 3 per variant" in refused(*SUBMIT)
    assert "there are results at 1.0+e1 (pass --epochs N" in refused(
        "submit", "my_ce.py", "--suite", "noisy-labels")
    with (tmp_path / "my_ce.py").open("a") as f:
        f.write("\n# edited after the run\n")
    assert "my_ce.py changed since its results were computed" in refused(*SUBMIT)


def _local_values(home: Path) -> dict[tuple[str, int], float]:
    with sqlite3.connect(home / "harness.sqlite3") as db:
        return {(v, s): x for v, s, x in db.execute(
            "SELECT c.variant, c.seed, m.value FROM webapp_metric m JOIN webapp_cell c ON "
            "c.id = m.cell_id JOIN webapp_objectiveversion v ON v.id = c.version_id JOIN "
            "webapp_objective o ON o.id = v.objective_id WHERE o.slug = 'my-ce' AND "
            "m.name = 'test_acc'")}


# --- an objective whose last bits depend on the row order -------------------------------

# One epoch: the row order moves the last bits of the first epoch's losses already.
GCE_RUN = ["run", "suite", "noisy-labels", "-o", "my_gce.py", "--seeds", str(SEEDS),
           "--epochs", "1", "--sandbox", *IN_PROCESS, "--variants", "sym-0.4"]
GCE_SUBMIT = ["submit", "my_gce.py", "--suite", "noisy-labels", "--epochs", "1",
              "--variants", "sym-0.4", "--wait"]


@pytest.fixture
def other_machine(tmp_path, settings, monkeypatch) -> tuple[Path, dict[str, str]]:
    """my_gce.py (the built-in gce under a name of its own) on a laptop whose sandbox key
    is not the server's; the server (one epoch: ``server``) checks every seed."""
    settings.HARNESS_VERIFY_FRACTION = 1.0
    monkeypatch.setenv("HARNESS_SANDBOX_KEY", "the-server-s-own-row-order-key")
    (tmp_path / "my_gce.py").write_text(read_source(Path(builtins()["gce"].path)))
    env = cli_environment(tmp_path / "home")
    env["HARNESS_SANDBOX_KEY"] = "a-laptop-s-own-row-order-key"
    return tmp_path, env


@pytest.mark.slow
def test_a_position_dependent_objective_verifies_when_run_in_the_server_s_row_order(
        server, other_machine):
    where, env = other_machine
    env.update(HARNESS_SERVER=server,
               HARNESS_TOKEN=tokens.create(User.objects.create_user("bob"), "laptop")[1])
    # Without the server's order: the last bits move, and the upload says why.
    done = harness(*GCE_RUN, env=env, cwd=where)
    assert done.returncode == 0, done.stderr
    done = harness(*GCE_SUBMIT, env=env, cwd=where)
    assert done.returncode == 1, done.stdout + done.stderr
    first = Upload.objects.get()
    assert first.status == Upload.UNVERIFIABLE, (first.status, first.differences)
    assert "row order" in first.reason
    # In the server's order (its key for this version, fetched with the token): exact.
    done = harness(*GCE_RUN, "--force", "--row-order-from", server, env=env, cwd=where)
    assert done.returncode == 0, done.stderr
    done = harness(*GCE_SUBMIT, env=env, cwd=where)
    assert done.returncode == 0, done.stdout + done.stderr
    second = Upload.objects.exclude(pk=first.pk).get()
    assert second.status == Upload.VERIFIED, (second.status, second.reason,
                                              second.differences)


@pytest.mark.django_db
def test_the_row_key_endpoint_needs_a_token_and_a_version_key(client, monkeypatch):
    from harness.sandbox.remote import version_row_key

    monkeypatch.setenv("HARNESS_SANDBOX_KEY", "k" * 32)
    key = "ab" * 32
    assert client.get(f"/api/row-keys/{key}").status_code == 401
    token = tokens.create(User.objects.create_user("carol"), "t")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    answer = client.get(f"/api/row-keys/{key}", **auth)
    assert answer.status_code == 200
    assert answer.json() == {"version_key": key, "row_key": version_row_key(key).decode()}
    assert version_row_key(key) != version_row_key("cd" * 32)  # one per version
    monkeypatch.setenv("HARNESS_SANDBOX_KEY", "another-server" * 3)
    assert client.get(f"/api/row-keys/{key}", **auth).json()["row_key"] != (
        answer.json()["row_key"])  # and per server
    bad = client.get("/api/row-keys/XYZ", **auth)
    assert bad.status_code == 400 and "64 lowercase hex" in bad.json()["error"]
    assert client.post(f"/api/row-keys/{key}", **auth).status_code == 405
