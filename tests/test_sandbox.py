"""The sandbox runs the same training as the trusted in-process path and judges it outside.

Attacks live in tests/test_hostile.py; these tests pin the normal behaviour: identical
numbers, typed failures, captured output, the output format and the isolation record.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from harness import registry, sandbox
from harness.objectives.loading import load_objective
from harness.pipeline import InvalidOutput
from harness.registry import get_suite
from harness.sandbox import Limits, run_cells_sandboxed

NOISY = get_suite("noisy-labels").shortened(2)


def _path(name: str) -> Path:
    return registry.builtins()[name].path


def _code(name: str) -> str:
    return _path(name).read_text()


def test_sandboxed_noisy_labels_equal_the_in_process_run():
    variants, seeds = ["sym-0.4", "asym-0.4"], [0, 1]
    inside = run_cells_sandboxed(NOISY, _code("gce"), "gce_copy.py", {"q": 0.5}, variants, seeds)
    trusted = NOISY.run_cells(load_objective(str(_path("gce")), {"q": 0.5}), variants,
                              seeds)
    assert [(r.variant, r.seed, r.status) for r in inside] == \
        [(r.variant, r.seed, "ok") for r in trusted]
    for a, b in zip(inside, trusted, strict=True):
        assert a.metrics == b.metrics  # same seeds, same device: bit-identical
        assert a.curves == b.curves
        assert a.info["sandbox"]["python_guard"] is True


def test_sandboxed_certified_equals_the_in_process_run():
    suite = get_suite("certified").shortened(2)
    inside = run_cells_sandboxed(suite, _code("ibp"), "ibp_copy.py", {}, ["eps-0.1"], [0, 1])
    trusted = suite.run_cells(load_objective(str(_path("ibp"))), ["eps-0.1"], [0, 1])
    for a, b in zip(inside, trusted, strict=True):
        assert a.status == b.status == "ok"
        assert a.metrics == b.metrics
        assert a.info["training"] == b.info["training"] == "certified"


def test_a_syntax_error_fails_every_cell_with_the_line():
    results = run_cells_sandboxed(NOISY, "def classification_loss(logits, labels:\n", "bad.py",
                                  {}, ["clean"], [0, 1])
    assert [r.status for r in results] == ["failed", "failed"]
    assert {r.reason for r in results} == {"objective"}
    assert "syntax" in results[0].error.lower() and "line 1" in results[0].error
    assert "harness-sandbox-" not in results[0].error  # the server's paths are scrubbed


def test_an_exception_in_the_hook_shows_the_users_traceback():
    code = ("import torch.nn.functional as F\n\n"
            "def classification_loss(logits, labels):\n"
            "    raise ValueError('my own bug')\n")
    [result] = run_cells_sandboxed(NOISY, code, "mine.py", {}, ["clean"], [0])
    assert (result.status, result.reason) == ("failed", "objective")
    assert "my own bug" in result.error and "mine.py" in result.error


def test_output_is_captured_and_truncated():
    code = ("import torch.nn.functional as F\n"
            "print('hello from the objective')\n"
            "print('x' * 5000)\n\n"
            "def classification_loss(logits, labels):\n"
            "    return F.cross_entropy(logits, labels)\n")
    limits = dataclasses.replace(Limits.for_run(NOISY, 1, 1), output_bytes=1000)
    [result] = run_cells_sandboxed(NOISY, code, "loud.py", {}, ["clean"], [0], limits=limits)
    assert result.status == "ok"
    assert result.captured.startswith("hello from the objective")
    assert "bytes of output omitted" in result.captured
    assert len(result.captured) < 1000 + 4096 + 200


def test_heartbeats_arrive_while_the_child_trains(monkeypatch):
    monkeypatch.setattr(sandbox, "HEARTBEAT_SECONDS", 0.2)
    beats = []
    slow = "import time\ntime.sleep(1.5)\n" + _code("ce")  # at import: a slow setup
    run_cells_sandboxed(NOISY, slow, "ce_copy.py", {}, ["clean"], [0],
                        heartbeat=lambda: beats.append(1))
    assert len(beats) >= 3


def test_a_failing_heartbeat_does_not_kill_the_cell(monkeypatch):
    monkeypatch.setattr(sandbox, "HEARTBEAT_SECONDS", 0.2)

    def broken() -> None:
        raise ConnectionError("database restarting")

    [result] = run_cells_sandboxed(NOISY, _code("ce"), "ce_copy.py", {}, ["clean"], [0],
                                   heartbeat=broken)
    assert result.status == "ok"


def test_limits_follow_the_suites_resources():
    suite = get_suite("noisy-labels")
    limits = Limits.for_run(suite, members=10, threads=2)
    r = suite.resources
    assert limits.wall_seconds == r.base_seconds + 10 * r.seconds_per_member
    assert limits.cpu_seconds == int(limits.wall_seconds * 2) + 30
    assert limits.memory_bytes == r.memory_mb * 2**20


def test_outputs_are_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    payload = tmp_path / "outputs.npz"
    payload.write_bytes(pickle.dumps(_Exploit(str(marker))))
    with pytest.raises(InvalidOutput, match="not plain numpy arrays"):
        sandbox._read_outputs(payload)
    np.savez(payload, x=np.array([object()], dtype=object))
    with pytest.raises(InvalidOutput, match="not plain numpy arrays"):
        sandbox._read_outputs(payload)
    assert not marker.exists()
    np.savez(payload, x=np.arange(3))
    assert sandbox._read_outputs(payload)["x"].tolist() == [0, 1, 2]


def test_strict_mode_refuses_a_machine_without_isolation(monkeypatch):
    monkeypatch.setenv("HARNESS_SANDBOX_STRICT", "1")
    monkeypatch.setattr(sandbox.launcher, "isolation_support", lambda: {
        "namespaces": False, "landlock": 0, "setpriv": False, "uid_drop": False})
    with pytest.raises(sandbox.SandboxUnavailable):
        run_cells_sandboxed(NOISY, _code("ce"), "ce_copy.py", {}, ["clean"], [0])


def test_exit_reasons_are_typed():
    limits = Limits.for_run(NOISY, 1, 1)
    assert sandbox._exit_reason(-24, 0.0, limits)[0] == "cpu"  # SIGXCPU
    assert sandbox._exit_reason(-9, 0.0, limits)[0] == "memory"
    assert sandbox._exit_reason(-11, 0.0, limits) == (
        "crash", "the sandboxed process died of SIGSEGV without a result")
    assert sandbox._exit_reason(3, 0.0, limits)[0] == "crash"


class _Exploit:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


HOSTILE = Path(__file__).resolve().parent / "hostile"


def test_verified_epochs_give_the_same_numbers_and_defeat_forged_curves():
    variants, seeds = ["sym-0.4"], [0, 1]
    plain = run_cells_sandboxed(NOISY, _code("ce"), "ce_copy.py", {}, variants, seeds)
    verified = run_cells_sandboxed(NOISY, _code("ce"), "ce_copy.py", {}, variants, seeds,
                                   verify_epochs=True)
    for a, b in zip(plain, verified, strict=True):
        assert (a.info["epochs_verified"], b.info["epochs_verified"]) == (False, True)
        assert a.metrics == b.metrics and a.curves == b.curves
    # An objective that forges every epoch's predictions but the last (1-NN, ~0.98): with
    # verification the curve comes from each epoch's weights, so nothing is inflated.
    forged = (HOSTILE / "fake_earlier_epochs.py").read_text()
    for r in run_cells_sandboxed(NOISY, forged, "forged.py", {}, variants, seeds,
                                 verify_epochs=True):
        assert r.status != "ok" or r.metrics["best_test_acc"] < 0.9, r.metrics
