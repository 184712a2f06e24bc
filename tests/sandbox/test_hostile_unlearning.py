"""Attacks specific to the unlearning suites (tests/sandbox/hostile_unlearning/): reaching the
retain model or the evaluation answers through the fixture cache on disk or the heap.
Each runs in the sandbox on the shortened mini-TOFU (2-epoch fixtures), with the Python
guard and, where the machine has them, with the kernel layers alone.

The generated corpus itself is public by design (as TOFU's released files are): what the
sandbox keeps from the objective is the trusted process's models and judge state."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract.suite import CellResult
from harness.data import fixtures
from harness.runner.sandboxed import run_cells_sandboxed
from suites.unlearning.tests.test_unlearning_suite import TOFU
from tests.sandbox.hostile_cases import needs_kernel

pytestmark = pytest.mark.slow
HOSTILE = Path(__file__).parent / "hostile_unlearning"


def attack(name: str, *, python_guard: bool = True) -> CellResult:
    code = (HOSTILE / f"{name}.py").read_text().replace("__UNLEARNING_FIXTURES__",
                                                      str(fixtures.root()))
    results = run_cells_sandboxed(TOFU, code, f"{name}.py", {}, ["forget05"], [0],
                                  python_guard=python_guard)
    assert len(results) == 1
    return results[0]


def refused(r: CellResult, what: str) -> None:
    assert (r.status, r.reason) == ("killed", "violation"), (r.status, r.reason, r.error,
                                                             r.captured)
    assert what in r.error, r.error


def test_the_retain_models_in_the_fixture_cache_are_out_of_reach():
    fixtures.load(TOFU, "retain", 0, {"forget": 5})  # it exists on the worker's disk
    r = attack("fixture_cache")
    refused(r, str(fixtures.root()))
    assert "cache: [" not in r.captured


@needs_kernel
def test_the_fixture_cache_is_not_in_the_sandboxs_root():
    r = attack("fixture_cache", python_guard=False)
    assert r.status == "ok", (r.status, r.error)
    assert "cache: missing" in r.captured, r.captured


def test_walking_the_heap_for_the_retain_model_or_answers_is_refused():
    refused(attack("gc_answers"), "gc.get_objects")


@needs_kernel
def test_no_model_or_answer_is_in_the_loss_servers_heap():
    r = attack("gc_answers", python_guard=False)
    assert r.status == "ok", (r.status, r.error)
    assert "heap walked: parameter_like=0 answer_texts=0" in r.captured, r.captured
