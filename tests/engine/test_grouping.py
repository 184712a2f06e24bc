"""A cell's numbers do not depend on what it was batched with.

The CLI trains all variants of an objective at once (7 variants × seeds), a worker task one
variant (its seeds), a verification one sampled seed: the same (objective, variant, seed)
must come out bit for bit the same from each, or a server result could not be reproduced
locally. Each cell trains in its canonical member chunk (harness/contract/chunks.py): the same
members, in the same places, whatever else was asked for. Each cell's record says what its
numbers do depend on. A CLI-like run here asks for two variants (each variant's chunks train
one after the other, so two show what seven do, at two sevenths of the training).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.contract.chunks import Chunk, chunks, covering, members_trained
from harness.contract.registry import get_suite, pipeline
from harness.contract.suite import SuiteError
from harness.objectives.loading import load_objective
from harness.runner.environment import using_threads
from harness.runner.inprocess import run_cells
from harness.runner.jobs import chunk_jobs
from harness.runner.sandboxed import run_cells_sandboxed

SUITE = get_suite("noisy-labels").shortened(3)
VARIANT = "sym-0.4"
CELL = (VARIANT, 0)
GROUPINGS = {  # cells asked for → (variants, seeds)
    1: ([VARIANT], [0]),
    2: ([VARIANT], [0, 1]),
    7: ([VARIANT], list(range(7))),
    14: (SUITE.default_variants, [0, 1]),
}
CLI_VARIANTS = ["clean", VARIANT]  # several variants asked for at once, as by the CLI


def _trained(objective: str, variants: list[str], seeds: list[int]) -> dict[str, np.ndarray]:
    """The arrays ``train`` returns for CELL (weights, curves, predictions), from the job
    that trains it when ``variants × seeds`` are asked for."""
    steps = pipeline(SUITE)
    for _, job in chunk_jobs(steps, SUITE, [SUITE.variant(v) for v in variants], seeds):
        if CELL in job.members:
            out = steps.train(SUITE, load_objective(objective), dict(job.inputs),
                              dict(job.plan))
            m = job.members.index(CELL)
            return {k: v[m] for k, v in out.arrays.items()
                    if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == len(job.members)}
    raise AssertionError(f"no job trains {CELL}")


@pytest.fixture(scope="module", autouse=True)
def _two_threads():
    # with several threads a kernel may split its work by the batch's size: the case to test
    with using_threads(2):
        yield


# gce's p**q on the epoch's partial last batch (1000 = 15·64 + 40) is the case that used to
# differ: an elementwise kernel's scalar tail holds different values in different groupings
# (docs/reproducibility.md). Without chunks gce fails here from the second epoch on.
@pytest.mark.parametrize("objective", ["ce", "gce"])
def test_training_is_bit_identical_in_groups_of_1_2_7_and_14(objective):
    runs = {n: _trained(objective, *GROUPINGS[n]) for n in GROUPINGS}
    assert len(runs[1]) >= 4  # the weights and the curves at least
    for n in (2, 7, 14):
        for name, value in runs[1].items():
            assert np.array_equal(runs[n][name], value, equal_nan=True), (
                f"{objective}: {name} differs between asking for 1 cell and for {n}")


def _cell(results, cell=CELL):
    (found,) = [r for r in results if (r.variant, r.seed) == cell]
    return found


def test_a_cli_run_a_worker_task_and_a_rerun_of_one_seed_give_the_same_cell():
    gce = load_objective("gce")
    cli = run_cells(SUITE, gce, CLI_VARIANTS, [0, 1])
    task = run_cells(SUITE, gce, [VARIANT], list(range(5)))
    rerun = run_cells(SUITE, gce, [VARIANT], [1])
    assert len(cli) == 4 and len(task) == 5  # the cells asked for, no more
    assert [(r.variant, r.seed) for r in rerun] == [(VARIANT, 1)]  # its chunk's others dropped
    for seed in (0, 1):
        want = _cell(task, (VARIANT, seed))
        got = [_cell(cli, (VARIANT, seed))] + ([rerun[0]] if seed == 1 else [])
        for r in got:  # exactly, every metric and every curve
            assert (r.metrics, r.curves) == (want.metrics, want.curves)
    for r in (*cli, *task, *rerun):  # what the numbers depend on is recorded
        assert r.info["chunk"] == {"size": 5, "index": 0}
        assert r.info["group_members"] == 5 and r.info["torch_threads"] == 2


def test_sandboxed_a_run_of_two_variants_and_a_rerun_of_one_seed_give_the_same_cell():
    """Sandboxed, the loss is served from one process per member, and the worker's chunks
    are the CLI's. (An in-process and a sandboxed run may differ in the last bit: the
    sandbox sends a batch's rows in a secret order, docs/reproducibility.md.)"""
    code = Path(load_objective("gce").path).read_text()
    reports: list[float] = []  # the trainer's progress, as a worker's heartbeat gets it
    sandboxed = run_cells_sandboxed(SUITE, code, "gce.py", {}, CLI_VARIANTS, [0, 1],
                                    threads=2, progress=reports.append)
    rerun = run_cells_sandboxed(SUITE, code, "gce.py", {}, [VARIANT], [1], threads=2)
    # 2 chunks × 3 epochs, each report the cells asked for: 2 of the chunk's 5, over 3 epochs
    assert len(reports) == 6 and sum(reports) == pytest.approx(4)
    assert len(sandboxed) == 4 and [(r.variant, r.seed) for r in rerun] == [(VARIANT, 1)]
    same = _cell(sandboxed, (VARIANT, 1))
    assert same.status == "ok" and same.info["sandbox"]
    assert (same.metrics, same.curves) == (rerun[0].metrics, rerun[0].curves)
    assert same.info["chunk"] == {"size": 5, "index": 0} and same.info["group_members"] == 5


# --- which chunk a seed trains in --------------------------------------------------------


def test_seeds_fall_into_fixed_chunks_of_their_variant():
    assert covering("v", [12, 0, 3, 7, 3], 5) == [Chunk("v", 0, 5, (0, 3)),
                                                   Chunk("v", 1, 5, (7,)),
                                                   Chunk("v", 2, 5, (12,))]
    assert Chunk("v", 2, 5, (12,)).seeds == [10, 11, 12, 13, 14]
    assert covering("v", [4], 1) == [Chunk("v", 4, 1, (4,))]
    assert [c.variant for c in chunks(SUITE, ["clean", VARIANT], [0, 6])] == [
        "clean", "clean", VARIANT, VARIANT]
    assert members_trained(SUITE, ["clean", VARIANT], [0, 1, 2]) == 10
    assert members_trained(SUITE, [VARIANT], range(6)) == 10


def test_the_unlearning_suites_train_each_seed_alone():
    for name in ("unlearning-tofu", "unlearning-muse"):
        suite = get_suite(name)
        assert suite.chunk == 1 and members_trained(suite, suite.default_variants[:1], [3]) == 1


@pytest.mark.parametrize("seeds,size,message", [
    ([-1], 5, "integers from 0"), ([1.5], 5, "integers from 0"), ([True], 5, "integers"),
    ([0], 0, "at least 1 seed")])
def test_bad_seeds_or_chunk_sizes_are_refused(seeds, size, message):
    with pytest.raises(ValueError, match=message):
        covering("v", seeds, size)


def test_a_suite_declaring_an_empty_chunk_is_refused():
    from dataclasses import replace

    for bad in (0, -5, 2.5, True):
        with pytest.raises(SuiteError, match="at least 1 seed"):
            replace(SUITE, chunk=bad)


def test_a_local_run_hands_its_workers_one_variant_at_a_time_longest_budget_first():
    from harness.runner.group import Group
    from harness.runner.local import spread

    noisy = Group("ce", "noisy-labels", "1.0", ("clean", "sym-0.4"), (0, 1, 2, 3, 4))
    tofu = Group("grad_diff", "unlearning-tofu", "1.0", ("forget05", "forget10"), (0, 1))
    entries = spread([("ce", None, noisy), ("grad_diff", None, tofu)], workers=2)
    # noisy-labels: 120 + 10·5 s for a chunk of 5; mini-TOFU: 600 + 120·2 s for 2 seeds
    assert [(label, g.suite, g.variants) for label, _, g in entries] == [
        ("grad_diff", "unlearning-tofu", ("forget05",)),
        ("grad_diff", "unlearning-tofu", ("forget10",)),
        ("ce", "noisy-labels", ("clean",)), ("ce", "noisy-labels", ("sym-0.4",))]
    assert spread([("ce", None, noisy)], workers=1) == [("ce", None, noisy)]
