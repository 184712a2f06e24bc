"""Hostile objectives that exhaust a resource or break: memory (at import, per call,
traced), CPU, the wall clock, the disk, output; exits, segfaults, base exceptions,
recursion, and losses that are NaN or of the wrong shape or dtype (docs/sandbox.md: the
limits, the memory cgroup, the tmpfs quota, the worker's supervision; every one ends with
the status and reason its table gives). Each attack is a file in tests/sandbox/hostile/,
run as hostile_cases.py describes.
"""

from __future__ import annotations

import pytest

from tests.sandbox.hostile_cases import (
    SUITE,
    WORKER_GROWTH,
    assert_clear,
    assert_scores_as_ce,
    attack,
)

# --- resource limits -----------------------------------------------------------------------------


@attack("memory_50gb@per_call")
def test_allocating_50_gb_is_killed_for_memory(corpus):
    run = corpus.run("memory_50gb@per_call")
    assert_clear(run, "killed", "memory", "allocate")
    assert run.result.info["sandbox"]["served"]["classification_loss"].startswith("per call")


@attack("memory_50gb@traced")
def test_a_traced_50_gb_allocation_is_refused_before_it_is_made(corpus):
    # traced on fake tensors in the server (nothing allocated there); the worker checks the
    # graph's sizes on meta tensors before its first real call, will not run it and serves
    # it per call instead: the allocation is then the sandbox's to refuse
    run = corpus.run("memory_50gb@traced")
    assert_clear(run, "killed", "memory", "allocate")
    assert run.result.info["sandbox"]["served"]["classification_loss"] == (
        "per call: the traced hook makes a tensor of 50,000,000,000 elements "
        "(at most 4,194,304)")
    assert run.peak_growth is None or run.peak_growth < WORKER_GROWTH


@attack("memory_at_import")
def test_allocating_50_gb_at_import_is_killed_for_memory(corpus):
    assert_clear(corpus.run("memory_at_import"), "killed", "memory", "allocate",
                 "memory_at_import.py raised")


@attack("spin_forever")
def test_spinning_forever_is_killed_for_cpu(corpus):
    run = corpus.run("spin_forever")
    assert_clear(run, "killed", "cpu", "CPU time")


@attack("sleep_forever")
def test_sleeping_forever_times_out_on_the_wall_clock(corpus):
    run = corpus.run("sleep_forever")
    assert_clear(run, "timeout", "wall", "wall-clock limit of 10 s")


@attack("fill_disk")
def test_filling_the_disk_is_killed_for_disk(corpus):
    run = corpus.run("fill_disk")
    assert_clear(run, "killed", "disk", "32 MiB disk quota")


@attack("print_1gb")
def test_printing_1_gb_is_killed_for_output(corpus):
    run = corpus.run("print_1gb")
    r = assert_clear(run, "killed", "output", "output limit")
    assert len(r.captured) < (64 << 10) + 4096 + 200  # the kept head and tail only


# --- crashes and broken losses -------------------------------------------------------------------


@attack("os_exit")
def test_os_exit_is_a_crash(corpus):
    assert_clear(corpus.run("os_exit"), "failed", "crash", "exited with status 3")


@attack("fake_setup_failure")
def test_exiting_with_the_setup_failure_status_is_a_crash(corpus):
    # status 71 means "setup failed" only before the child's ready line; after it, the
    # objective's own exit is a crash, never SandboxUnavailable (retried as infrastructure)
    run = corpus.run("fake_setup_failure")
    assert run.raised is None, f"{type(run.raised).__name__}: {run.raised}"
    r = assert_clear(run, "failed", "crash", "exited with status 71 without a result")
    assert "[sandbox ready]" not in r.captured  # the parent's own line, stripped


@pytest.mark.parametrize("case", ["segfault_ctypes", "segfault_faulthandler"])
def test_a_segfault_is_a_crash(corpus, case):
    assert_clear(corpus.run(case), "failed", "crash", "died of SIGSEGV without a result")


@pytest.mark.parametrize(("case", "name"), [("system_exit", "SystemExit"),
                                            ("keyboard_interrupt", "KeyboardInterrupt"),
                                            ("infinite_recursion", "RecursionError")])
def test_base_exceptions_and_recursion_fail_the_objective(corpus, case, name):
    assert_clear(corpus.run(case), "failed", "objective", name)


@attack("nan_loss")
def test_a_nan_loss_diverges(corpus):
    r = corpus.result("nan_loss")
    assert (r.status, r.reason, r.diverged_step) == ("diverged", "", 0)
    assert "test_acc" not in r.metrics


@attack("wrong_shape_loss")
def test_a_wrong_shape_loss_fails_the_objective(corpus):
    batch = SUITE.settings["batch_size"]
    assert_clear(corpus.run("wrong_shape_loss"), "failed", "objective", "ValueError",
                 f"the loss must be a scalar or per-sample [B], got shape ({batch}, 10)")


@attack("wrong_dtype_loss")
def test_a_wrong_dtype_loss_fails_the_objective(corpus):
    assert_clear(corpus.run("wrong_dtype_loss"), "failed", "objective", "dtype", "Long")


@attack("no_gradient_loss")
def test_a_loss_without_a_gradient_fails_the_objective(corpus):
    assert_clear(corpus.run("no_gradient_loss"), "failed", "objective", "no gradient")


@attack("custom_function_ce")
def test_a_custom_autograd_function_is_served_per_call(corpus):
    run = corpus.run("custom_function_ce")
    assert_scores_as_ce(run, corpus)
    served = run.result.info["sandbox"]["served"]["classification_loss"]
    assert served.startswith("per call") and "autograd.Function" in served, served
