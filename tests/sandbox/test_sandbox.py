"""Submitted objectives train here with their loss served from the sandbox, and give the
same numbers as the trusted in-process path.

Attacks live in tests/sandbox/test_hostile_*.py; these tests pin the normal behaviour:
identical numbers (stateless, stateful and certified hooks, with lazily computed context), typed
failures, captured output, the protocol's checks and the isolation record.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness import sandbox
from harness.contract import registry
from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from harness.runner.sandboxed import run_cells_sandboxed
from harness.sandbox import Limits, remote
from harness.sandbox import process as sandbox_process

NOISY = get_suite("noisy-labels").shortened(2)


def _light_certified():
    """Certified training for 2 epochs in chunks of 2 members (one loss server each, not 5),
    judged with a 10-step, 2-restart PGD on ε_test alone (not 100 × 5 over a 5-point ε
    grid): the judge is trusted code that runs alike on both sides of a comparison."""
    suite = get_suite("certified").shortened(2)
    settings = suite.settings
    return dataclasses.replace(suite, chunk=2, settings={
        **settings, "pgd": {**settings["pgd"], "steps": 10, "restarts": 2}, "eps_grid": [1.0]})


CERTIFIED = _light_certified()


def _path(name: str) -> Path:
    return registry.builtins()[name].path


def _code(name: str) -> str:
    return _path(name).read_text()


def test_sandboxed_noisy_labels_equal_the_in_process_run():
    variants, seeds = ["sym-0.4", "asym-0.4"], [0, 1]
    inside = run_cells_sandboxed(NOISY, _code("gce"), "gce_copy.py", {"q": 0.5}, variants, seeds)
    trusted = run_cells(NOISY, load_objective(str(_path("gce")), {"q": 0.5}), variants,
                              seeds)
    assert [(r.variant, r.seed, r.status) for r in inside] == \
        [(r.variant, r.seed, "ok") for r in trusted]
    for a, b in zip(inside, trusted, strict=True):
        # Same seeds, same data order, same init: equal up to float rounding (the hook runs
        # unbatched in its server, under vmap in-process, which may round the last bit).
        _assert_close(a, b)
        assert a.info["sandbox"]["python_guard"] is True


def test_sandboxed_certified_equals_the_in_process_run():
    inside = run_cells_sandboxed(CERTIFIED, _code("ibp"), "ibp_copy.py", {}, ["eps-0.1"],
                                 [0, 1])
    trusted = run_cells(CERTIFIED, load_objective(str(_path("ibp"))), ["eps-0.1"], [0, 1])
    for a, b in zip(inside, trusted, strict=True):
        assert a.status == b.status == "ok"
        _assert_close(a, b)
        assert a.info["training"] == b.info["training"] == "certified"


def _assert_close(a, b) -> None:
    assert a.metrics.keys() == b.metrics.keys() and a.curves.keys() == b.curves.keys()
    for k in a.metrics:
        assert a.metrics[k] == pytest.approx(b.metrics[k], rel=1e-5, abs=1e-7), k
    for k in a.curves:
        assert a.curves[k] == pytest.approx(b.curves[k], rel=1e-5, abs=1e-7), k


@pytest.mark.parametrize("name", ["aldr_kl", "crown_ibp"])
def test_stateful_and_lazy_context_hooks_equal_the_in_process_run(name):
    """ALDR-KL's per-sample state goes out as the batch's slice and comes back; CROWN-IBP's
    lazily computed bounds are computed here and sent."""
    suite = NOISY if name == "aldr_kl" else CERTIFIED
    variant = "sym-0.4" if name == "aldr_kl" else "eps-0.1"
    inside = run_cells_sandboxed(suite, _code(name), f"{name}_copy.py", {}, [variant], [0, 1])
    trusted = run_cells(suite, load_objective(str(_path(name))), [variant], [0, 1])
    for a, b in zip(inside, trusted, strict=True):
        assert (a.status, b.status) == ("ok", "ok"), a.error
        _assert_close(a, b)


def test_the_loss_server_sees_one_member_and_no_indices():
    """Each member's loss runs in its own process, which is told nothing but its batch."""
    code = ("import os\nimport torch.nn.functional as F\n\n"
            "def classification_loss(logits, targets, *, state, progress):\n"
            "    print('seen', os.getpid(), tuple(logits.shape), tuple(state.shape),"
            " flush=True)\n"
            "    return F.cross_entropy(logits, targets)\n")
    results = run_cells_sandboxed(NOISY, code, "spy.py", {}, ["clean", "sym-0.4"], [0, 1])
    assert [r.status for r in results] == ["ok"] * 4
    shapes = {line.split(" ", 2)[2] for line in results[0].captured.splitlines()
              if line.startswith("seen")}
    assert shapes == {"(64, 10) (64,)", "(40, 10) (40,)"}  # batch slices, never [N]
    # one server per member of the cell's job: its chunk, seeds 0-4 of one variant
    assert results[0].info["sandbox"]["servers"] == 5
    assert results[0].info["sandbox"]["protocol"] == "loss-only"


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
    monkeypatch.setattr(remote, "HEARTBEAT_SECONDS", 0.2)
    beats = []
    slow = "import time\ntime.sleep(1.5)\n" + _code("ce")  # at import: a slow setup
    run_cells_sandboxed(NOISY, slow, "ce_copy.py", {}, ["clean"], [0],
                        heartbeat=lambda: beats.append(1))
    assert len(beats) >= 3


def test_a_failing_heartbeat_does_not_kill_the_cell(monkeypatch):
    monkeypatch.setattr(remote, "HEARTBEAT_SECONDS", 0.2)

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


def test_a_server_that_breaks_the_protocol_is_an_invalid_output():
    """A reply header longer than the cap, or garbage instead of JSON, is refused before
    anything is allocated for it or parsed."""
    for payload in (b"\xff\xff\xff\x7f", b"\x05\x00\x00\x00[[[[["):
        code = ("import os\nimport torch.nn.functional as F\n\n"
                "def classification_loss(logits, targets):\n"
                f"    os.write(3, {payload!r})\n"
                "    return F.cross_entropy(logits, targets)\n")
        [result] = run_cells_sandboxed(NOISY, code, "liar.py", {}, ["clean"], [0])
        assert (result.status, result.reason) == ("failed", "invalid-output"), result.error
        assert "protocol" in result.error


def test_strict_mode_refuses_a_machine_without_isolation(monkeypatch):
    monkeypatch.setenv("HARNESS_SANDBOX_STRICT", "1")
    monkeypatch.setattr(sandbox_process, "isolation_support", lambda: {
        "namespaces": False, "landlock": 0, "setpriv": False, "uid_drop": False})
    with pytest.raises(sandbox.SandboxUnavailable):
        run_cells_sandboxed(NOISY, _code("ce"), "ce_copy.py", {}, ["clean"], [0])


def test_exit_reasons_are_typed():
    limits = Limits.for_run(NOISY, 1, 1)
    assert sandbox_process._exit_reason(-24, 0.0, limits)[0] == "cpu"  # SIGXCPU
    assert sandbox_process._exit_reason(-9, 0.0, limits)[0] == "memory"
    assert sandbox_process._exit_reason(-11, 0.0, limits) == (
        "crash", "the sandboxed process died of SIGSEGV without a result")
    assert sandbox_process._exit_reason(3, 0.0, limits)[0] == "crash"


def test_server_errors_cross_a_process_boundary_intact():
    """A pool worker that raises them hands them back pickled: both fields survive."""
    import pickle

    from harness.sandbox.remote import RemoteError, ServerEnded

    ended = pickle.loads(pickle.dumps(ServerEnded("violation", "sandbox: x is not allowed")))
    assert (type(ended), ended.reason, ended.error, str(ended)) == (
        ServerEnded, "violation", "sandbox: x is not allowed", "sandbox: x is not allowed")
    raised = pickle.loads(pickle.dumps(RemoteError("ValueError: no", "objective")))
    assert (type(raised), str(raised), raised.reason) == (RemoteError, "ValueError: no",
                                                          "objective")
