"""Attacks specific to the test-time adaptation suite (tests/sandbox/hostile_tta/): reaching the
stream's labels through the heap, the trainer's memory or the fixture cache on disk, and
replies a trainer must not take. Each is run in the sandbox on one short stream, with the
Python guard and, where the machine has them, with the kernel layers alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.data import fixtures
from harness.runner.sandboxed import run_cells_sandboxed
from tests.sandbox.hostile_cases import needs_kernel

HOSTILE = Path(__file__).parent / "hostile_tta"
SUITE = dataclasses.replace(get_suite("tta"), chunk=1)  # one hostile server (and source
# model) per case; the chunk changes nothing a hostile case checks (harness/contract/chunks.py)
VARIANT = "continual"  # one reset, 15 short domains: a few seconds served per call


def attack(name: str, *, python_guard: bool = True) -> CellResult:
    code = (HOSTILE / f"{name}.py").read_text().replace("__TTA_FIXTURES__",
                                                      str(fixtures.root()))
    results = run_cells_sandboxed(SUITE, code, f"{name}.py", {}, [VARIANT], [0],
                                  python_guard=python_guard)
    assert len(results) == 1
    return results[0]


def refused(r: CellResult, what: str) -> None:
    assert (r.status, r.reason) == ("killed", "violation"), (r.status, r.reason, r.error,
                                                             r.captured)
    assert what in r.error, r.error


def test_walking_the_heap_for_stream_labels_is_refused():
    refused(attack("gc_stream_labels"), "gc.get_objects")


@needs_kernel
def test_no_stream_label_is_in_the_loss_servers_heap():
    r = attack("gc_stream_labels", python_guard=False)
    assert r.status == "ok", (r.status, r.error)
    assert "heap walked: label_like_arrays=0" in r.captured, r.captured


def test_the_fixture_cache_is_out_of_reach():
    fixtures.load(SUITE, "source_model", 0)  # it exists on the worker's disk
    assert fixtures.root().is_dir()
    r = attack("fixture_cache")
    refused(r, str(fixtures.root()))
    assert "cache: [" not in r.captured


@needs_kernel
def test_the_fixture_cache_is_not_in_the_sandboxs_root():
    r = attack("fixture_cache", python_guard=False)
    assert r.status == "ok", (r.status, r.error)
    assert "cache: missing" in r.captured, r.captured


def test_reading_the_trainers_memory_gets_nothing():
    """With a PID namespace the guard lets /proc be read (it holds the sandbox's own
    processes only) and the kernel refuses the parent's memory; without one, /proc is not a
    read root and the guard refuses. Either way no byte is read."""
    r = attack("parent_memory")
    assert "bytes of the parent" not in r.captured, r.captured
    assert (r.status, r.reason) == ("killed", "violation") or (
        r.status == "ok" and "parent memory: " in r.captured), (r.status, r.error, r.captured)


@needs_kernel
def test_the_trainers_memory_is_unreadable_to_the_kernel_layers_alone():
    r = attack("parent_memory", python_guard=False)
    assert "bytes of the parent" not in r.captured, r.captured


def test_a_gigantic_adjust_reply_is_refused_unread():
    r = attack("huge_adjust")
    assert r.status in ("failed", "killed") and r.reason in ("invalid-output", "output",
                                                             "memory"), (r.status, r.error)
    assert not r.metrics


def test_a_memory_of_another_shape_is_never_stored():
    r = attack("memory_overflow")
    assert r.status in ("failed", "killed"), (r.status, r.reason, r.error)
    assert not r.metrics
