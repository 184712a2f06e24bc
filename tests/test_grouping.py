"""A cell's numbers do not depend on what it was batched with.

The CLI trains all variants of an objective in one group (7 variants × seeds), a worker
task one variant (its seeds), a verification one sampled seed: the same (objective,
variant, seed) must come out bit for bit the same from each, or a server result could not
be reproduced locally. Each cell's record says what its numbers do depend on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.environment import torch_threads
from harness.objectives.loading import load_objective
from harness.pipeline import run_in_process
from harness.registry import get_suite, pipeline
from harness.sandbox import run_cells_sandboxed

SUITE = get_suite("noisy-labels").shortened(3)
VARIANT = "sym-0.4"
CELL = (VARIANT, 0)
GROUPINGS = {  # members in the group → (variants, seeds)
    1: ([VARIANT], [0]),
    2: ([VARIANT], [0, 1]),
    7: ([VARIANT], list(range(7))),
    14: (SUITE.default_variants, [0, 1]),
}


def _trained(objective: str, variants: list[str], seeds: list[int]) -> dict[str, np.ndarray]:
    """The arrays ``train`` returns for CELL (weights, curves, predictions)."""
    steps = pipeline(SUITE)
    (job,) = steps.prepare(SUITE, [SUITE.variant(v) for v in variants], seeds)
    out = steps.train(SUITE, load_objective(objective), dict(job.inputs), dict(job.plan))
    m = job.members.index(CELL)
    return {k: v[m] for k, v in out.arrays.items()
            if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == len(job.members)}


@pytest.fixture(scope="module", autouse=True)
def _two_threads():
    # with several threads a kernel may split its work by the batch's size: the case to test
    with torch_threads(2):
        yield


# Known, not fixed yet: an elementwise kernel runs its vector path over the first whole
# vectors of a tensor and a scalar path over the rest, and a transcendental (gce's p**q)
# differs in the last bit between the two. The epoch's last, partial batch (1000 = 15·64 +
# 40 samples) puts a member's last 8 values in the scalar tail when it trains alone and in
# the vector body when 2 members are stacked (80 values). Plain cross-entropy has no such
# op on a partial batch. The fix (fixed member-chunk shapes) is described in
# docs/reproducibility.md; strict: this fails loudly once the fix lands.
TAIL = pytest.mark.xfail(strict=True, reason="scalar tails of elementwise kernels on the "
                         "partial last batch (docs/reproducibility.md)")


@pytest.mark.parametrize("objective", ["ce", pytest.param("gce", marks=TAIL)])
def test_training_is_bit_identical_in_groups_of_1_2_7_and_14(objective):
    runs = {n: _trained(objective, *GROUPINGS[n]) for n in GROUPINGS}
    assert len(runs[1]) >= 4  # the weights and the curves at least
    for n in (2, 7, 14):
        for name, value in runs[1].items():
            assert np.array_equal(runs[n][name], value, equal_nan=True), (
                f"{objective}: {name} differs between a group of 1 and a group of {n}")


def test_judged_cells_are_identical_in_any_grouping_in_process_and_sandboxed():
    ce = load_objective("ce")
    alone = run_in_process(SUITE, ce, [SUITE.variant(VARIANT)], [0])
    grouped = run_in_process(SUITE, ce, [SUITE.variant(v) for v in SUITE.default_variants],
                             [0, 1])
    code = Path(ce.path).read_text()
    reports: list[float] = []  # the trainer's progress, as a worker's heartbeat gets it
    sandboxed = run_cells_sandboxed(SUITE, code, "ce.py", {}, SUITE.default_variants, [0, 1],
                                    threads=2, progress=reports.append)
    assert len(reports) == 3 and sum(reports) == pytest.approx(14)  # an epoch: 14 / 3
    cell = {r.status: r for r in alone}["ok"]
    for results, members in ((grouped, 14), (sandboxed, 14)):
        same = next(r for r in results if (r.variant, r.seed) == CELL)
        assert same.metrics == cell.metrics  # exactly, every metric
        assert same.info["group_members"] == members
    assert cell.info["group_members"] == 1
