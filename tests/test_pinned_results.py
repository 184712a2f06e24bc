"""Both suites' numbers are pinned: per-seed metrics and curves computed before the suite
contract and the general trainer existed (commit c7f8786) must come out of today's code
exactly, so that no refactoring of the trainer or the pipelines moves a stored result.

Bit-exact numbers hold per kind of CPU (AVX2, AVX-512 and AMX reduce floats in different
orders, and 100 epochs amplify the last bit): ``machines`` in the pinned file holds a set
per CPU fingerprint (tests/pin_machine.py, run from the commit being pinned); a machine
with no set of its own is compared with the original set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.objectives.loading import load_objective
from harness.registry import get_suite

DATA = Path(__file__).parent / "data"


def _pinned() -> list[dict]:
    from tests.pin_machine import fingerprint

    pinned = json.loads((DATA / "pinned_results.json").read_text())
    mine = pinned.get("machines", {}).get(fingerprint())
    return mine["cells"] if mine else pinned["cells"]


PINNED = _pinned()


@pytest.fixture
def one_thread():
    """The fixture was computed with one torch thread (as workers run); the per-member
    loop's matrix products round differently with two."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _groups() -> list[tuple[str, int | None, str]]:
    return list(dict.fromkeys((c["suite"], c["epochs"], c["objective"]) for c in PINNED))


@pytest.mark.slow
@pytest.mark.parametrize("suite_name,epochs,objective", _groups(),
                         ids=lambda x: str(x) if x is not None else "full")
def test_pinned_results_unchanged(suite_name, epochs, objective, one_thread):
    expected = [c for c in PINNED if (c["suite"], c["epochs"], c["objective"])
                == (suite_name, epochs, objective)]
    suite = get_suite(suite_name)
    if epochs:
        suite = suite.shortened(epochs)
    spec = str(DATA / f"{objective}.py") if (DATA / f"{objective}.py").exists() else objective
    variants = list(dict.fromkeys(c["variant"] for c in expected))
    seeds = sorted({c["seed"] for c in expected})
    got = {(r.variant, r.seed): r for r in suite.run_cells(load_objective(spec), variants, seeds)}
    for cell in expected:
        r = got[(cell["variant"], cell["seed"])]
        where = f"{objective} {cell['variant']} seed {cell['seed']}"
        assert r.status == cell["status"], where
        assert r.info.get("mode") == cell["mode"], where
        assert r.metrics == cell["metrics"], where
        assert r.curves == cell["curves"], where
