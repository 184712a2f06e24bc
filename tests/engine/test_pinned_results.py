"""Both suites' numbers are pinned: per-seed metrics and curves must come out of today's
code exactly, so that no refactoring of the trainer or the pipelines moves a stored result.
The first set was computed before the suite contract and the general trainer existed
(commit c7f8786).

A bit-exact pin holds at 3 epochs as well as at 100: every step's last bit feeds the next,
so a change anywhere in the trainer shows at once (the 3-epoch losses of two CPU kinds
already differ). The noisy-labels runs were pinned at 100 epochs until the code of
d7535c7 had reproduced those numbers bit for bit; they are pinned at 3 epochs since (the
file's ``note``), a twentieth of the training. The certified runs' cost is the judge's,
whatever the epochs.

Bit-exact numbers hold per kind of CPU (AVX2, AVX-512 and AMX reduce floats in different
orders): ``machines`` in the pinned file holds a set per CPU fingerprint
(tests/pin_machine.py, run from the commit being pinned); a machine with no set of its own
is compared with the original set.

One metric is compared to a relative 1e-6 instead: ``crown_gap``, the mean of CROWN's float
margins, whose summation order is an implementation detail of the bound computation (the
fused ReLU-and-Linear substitution of the intermediate bounds moved it by ~1e-7 relative and
nothing else); whether a sample is verified is still pinned exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.runner.environment import using_threads
from tests.pin_machine import fingerprint, groups, rerun

DATA = Path(__file__).parents[1] / "data"


def _pinned() -> list[dict]:
    pinned = json.loads((DATA / "pinned_results.json").read_text())
    mine = pinned.get("machines", {}).get(fingerprint())
    return mine["cells"] if mine else pinned["cells"]


PINNED = _pinned()
REASSOCIATED = {"crown_gap"}  # float means whose reduction order the bound code may change


@pytest.fixture
def one_thread():
    """The fixture was computed with one torch thread (as workers run); the per-member
    loop's matrix products round differently with two."""
    with using_threads(1):
        yield




@pytest.mark.slow
@pytest.mark.parametrize("suite_name,epochs,objective", groups(PINNED),
                         ids=lambda x: str(x) if x is not None else "full")
def test_pinned_results_unchanged(suite_name, epochs, objective, one_thread):
    for cell, r in rerun(PINNED, suite_name, epochs, objective):
        where = f"{objective} {cell['variant']} seed {cell['seed']}"
        assert r.status == cell["status"], where
        assert r.info.get("mode") == cell["mode"], where
        assert r.metrics == {k: pytest.approx(v, rel=1e-6) if k in REASSOCIATED else v
                             for k, v in cell["metrics"].items()}, where
        assert r.curves == cell["curves"], where
