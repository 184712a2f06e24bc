"""`harness run suite … --sandbox` and `harness validate --sandbox`: the CLI process never
imports the objective file, and what an objective prints reaches the terminal escaped.

Each hostile file acts at its top level, which any import runs: it writes a file outside
the sandbox (next to the results database), connects to a port on the loopback (a
listener standing in for the local PostgreSQL and Redis), or reads a secret from the
environment and prints it. Everything is checked from outside: the marker file, the
listener's accepted connections, the CLI's output and the stored rows. The real `harness`
command runs in subprocesses on the embedded SQLite default, with smoke-run epochs
(as in tests/client/test_cli.py), training in the CLI's own process (``--workers 1``: a sandboxed
run over the worker pool is tests/engine/test_fake_suite.py's).
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.objectives.loading import load_objective
from tests.client.test_cli import IN_PROCESS, cells, harness, query, write
from tests.engine.test_textsafe import RAW_CONTROLS

SHORT = ["--variants", "clean", "--seeds", "1", "--epochs", "1"]
SECRET = "s3cret-d4tabase-passw0rd"

HONEST = '''\
"""Temperature-scaled cross-entropy."""
import os

import torch.nn.functional as F

print("top level ran; secret =", os.environ.get("HARNESS_TEST_SECRET", "absent"))


def classification_loss(logits, targets, *, temperature: float = 1.0):
    return F.cross_entropy(logits / temperature, targets, reduction="none")
'''

WRITES = '''\
open({marker!r}, "w").write("imported outside the sandbox")


def classification_loss(logits, targets):
    return logits.logsumexp(-1) - logits.gather(-1, targets[:, None]).squeeze(-1)
'''

CONNECTS = '''\
import socket

with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:  # "the database"
    s.sendall(b"hello from the objective")
open({marker!r}, "w").write("connected")


def classification_loss(logits, targets):
    return logits.logsumexp(-1) - logits.gather(-1, targets[:, None]).squeeze(-1)
'''

# Passes the validator (batches of 8); on the training batches it prints terminal control
# sequences and raises with them in its message.
PRINTS_CONTROLS = '''\
import sys


def classification_loss(logits, targets):
    if targets.shape[-1] > 8:
        print("\\x1b[2J\\x1b]0;pwned\\x07cell 0: killed\\rcell 0: ok    ")
        print("\\u202eevil\\u202c", file=sys.stderr)
        raise RuntimeError("boom \\x1b[31mred\\x1b[0m \\u2066hidden\\u2069")
    return logits.logsumexp(-1) - logits.gather(-1, targets[:, None]).squeeze(-1)
'''


@pytest.fixture
def env(cli_env) -> dict[str, str]:
    Path(cli_env["HARNESS_HOME"]).mkdir(parents=True, exist_ok=True)
    return {**cli_env, "HARNESS_TEST_SECRET": SECRET}


@pytest.fixture
def listener():
    """A TCP server on the loopback; ``accepted()`` says whether anything connected."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)

    def accepted() -> bool:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    yield SimpleNamespace(port=server.getsockname()[1], accepted=accepted)
    server.close()


def _hostile(kind: str, tmp_path: Path, env: dict[str, str], listener) -> tuple[Path, Path]:
    marker = Path(env["HARNESS_HOME"]) / "pwned"  # next to the results database
    source = (WRITES.format(marker=str(marker)) if kind == "writes" else
              CONNECTS.format(port=listener.port, marker=str(marker)))
    return write(tmp_path / f"{kind}.py", source), marker


def _contained(proc: subprocess.CompletedProcess, marker: Path, listener) -> None:
    assert not marker.exists(), "the objective file ran outside the sandbox"
    assert not listener.accepted(), "the objective reached a local port"
    output = proc.stdout + proc.stderr
    assert "is not allowed" in output, output  # the sandbox's refusal, named
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["writes", "connects"])
def test_validate_sandbox_never_imports_the_file(kind, env, tmp_path, listener):
    path, marker = _hostile(kind, tmp_path, env, listener)
    proc = harness("validate", "--sandbox", path.name, env=env, cwd=tmp_path)
    _contained(proc, marker, listener)
    assert proc.returncode == 1, proc.stderr
    assert f"FAILED: {path.name}" in proc.stdout


@pytest.mark.parametrize("kind", ["writes", "connects"])
def test_run_sandbox_never_imports_the_file(kind, env, tmp_path, listener):
    path, marker = _hostile(kind, tmp_path, env, listener)
    proc = harness("run", "suite", "noisy-labels", "-o", path.name, *SHORT, "--sandbox",
                   env=env, cwd=tmp_path)
    _contained(proc, marker, listener)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "harness validate --sandbox" in proc.stderr
    assert cells(env, missing_ok=True) == []  # refused before anything ran or was stored


def test_validate_sandbox_of_an_honest_file(env, tmp_path):
    write(tmp_path / "honest.py", HONEST)
    proc = harness("validate", "--sandbox", "honest.py", "--set", "temperature=2", env=env,
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith(
        "OK: honest — classification_loss (temperature=2.0) (checked in the sandbox)")
    assert "top level ran" not in proc.stdout + proc.stderr  # it ran over there only
    unknown = harness("validate", "--sandbox", "honest.py", "--set", "q=1", env=env,
                      cwd=tmp_path)
    assert unknown.returncode == 1
    assert "unknown hyperparameter 'q' (this objective has: temperature)" in unknown.stdout


@pytest.mark.slow
def test_run_sandbox_trains_an_honest_file_under_its_usual_version(env, tmp_path):
    """Results for an honest file with --set; the environment's secret never reached it;
    stored under the version an in-process load gives (code hash from the text)."""
    path = write(tmp_path / "honest.py", HONEST)
    proc = harness("run", "suite", "noisy-labels", "-o", "honest.py", "--set",
                   "temperature=2", *SHORT, "--sandbox", *IN_PROCESS, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "top level ran" not in proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    stored = {c["label"]: c for c in cells(env)}
    assert set(stored) == {"ce", "honest(temperature=2.0)"}
    assert {c["status"] for c in stored.values()} == {"ok"}
    [(captured,)] = query(env, "SELECT captured FROM webapp_cell WHERE id = ?",
                          stored["honest(temperature=2.0)"]["id"])
    assert "top level ran; secret = absent" in captured  # imported in the sandbox only
    assert SECRET not in captured

    expected = load_objective(str(path), {"temperature": 2})  # honest: safe to load here
    [(key, sha, hp, name)] = query(
        env, "SELECT v.key, v.code_sha256, v.hyperparameters, o.name FROM "
             "webapp_objectiveversion v JOIN webapp_objective o ON v.objective_id = o.id "
             "WHERE v.label = 'honest(temperature=2.0)'")
    assert (key, sha, name) == (expected.version_key, expected.code_sha256, "honest")
    assert hp == '{"temperature": 2.0}'
    again = harness("run", "suite", "noisy-labels", "-o", "honest.py", "--set",
                    "temperature=2", *SHORT, env=env, cwd=tmp_path)  # in-process
    assert again.returncode == 0, again.stderr
    assert "2 cells already stored" in again.stdout  # the same version: nothing to rerun
    assert len(cells(env)) == 2


def test_run_sandbox_refuses_a_file_the_validator_caught_misbehaving(env, tmp_path):
    """A hook that peeks on the validator's smoke batches is refused before any cell runs,
    as the submission form refuses it (one that peeks only in training is killed then:
    tests/client/test_cli.py)."""
    write(tmp_path / "peeks.py", """\
def classification_loss(logits, targets):
    open("/etc/passwd").read()
    return logits.logsumexp(-1)
""")
    proc = harness("run", "suite", "noisy-labels", "-o", "peeks.py", *SHORT, "--sandbox",
                   env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "harness: sandbox: reading /etc/passwd is not allowed" in proc.stderr
    assert cells(env, missing_ok=True) == []


def test_sandbox_refuses_a_dotted_module(env, tmp_path):
    proc = harness("run", "suite", "noisy-labels", "-o", "somepkg.loss", *SHORT, "--sandbox",
                   env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "the sandbox runs objective files" in proc.stderr


def test_help_says_what_running_without_the_sandbox_means(env, tmp_path):
    for verb in (["run", "suite"], ["validate"]):
        proc = harness(*verb, "--help", env=env, cwd=tmp_path)
        text = " ".join(proc.stdout.split())
        assert "Without --sandbox" in text and "your own code, with your rights" in text


# --- captured output and errors reach the terminal escaped ----------------------------


@pytest.mark.slow
def test_captured_output_and_errors_are_printed_escaped(env, tmp_path):
    write(tmp_path / "noisy.py", PRINTS_CONTROLS)
    proc = harness("run", "suite", "noisy-labels", "-o", "noisy.py", *SHORT, "--sandbox",
                   *IN_PROCESS, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "noisy: 1 cells did not finish (failed: objective)" in out
    assert "boom \\x1b[31mred\\x1b[0m \\u2066hidden\\u2069" in out  # the error
    assert "\\x1b[2J\\x1b]0;pwned\\x07cell 0: killed\\x0dcell 0: ok" in out  # its output
    assert "\\u202eevil\\u202c" in out
    assert not any(c in out + proc.stderr for c in RAW_CONTROLS)
    [(error, captured)] = query(env, "SELECT c.error, c.captured FROM webapp_cell c JOIN "
                                     "webapp_objectiveversion v ON c.version_id = v.id "
                                     "WHERE v.label = 'noisy'")
    assert "\x1b[31mred" in error and "\x1b[2J" in captured  # stored as it was


def test_validate_prints_an_objectives_error_escaped(env, tmp_path):
    write(tmp_path / "raises.py", 'raise ValueError("\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil")\n')
    for args in (["validate", "raises.py"], ["validate", "--sandbox", "raises.py"]):
        proc = harness(*args, env=env, cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil" in proc.stdout
        assert not any(c in proc.stdout + proc.stderr for c in RAW_CONTROLS)
