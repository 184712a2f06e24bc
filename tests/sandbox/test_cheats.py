"""Objectives that try to raise their score without any forbidden action score as plain CE.

Only the loss runs in the sandbox (docs/sandbox.md): the server of one member gets that
member's batch — its logits, targets and asked-for context, rows in a secret order — and
nothing else. Each file in tests/sandbox/cheats/ tries a way the previous protocol left open
(the trainer's data order, its frames, the other members' labels) and prints what it
found; here its cells must score like cross-entropy on the same seeds, and the printout
must show it found nothing. The first test shows the order cheat is real: given rows in
the public order (as a trusted in-process hook is), it beats CE by a wide margin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.contract.registry import get_suite
from harness.data.digits import digits_split
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from harness.runner.sandboxed import run_cells_sandboxed

CHEATS = Path(__file__).resolve().parent / "cheats"
EPOCHS = 6
SUITE = get_suite("noisy-labels").shortened(EPOCHS)
VARIANT, SEEDS = "sym-0.4", [0, 1, 2]
CE = ("import torch.nn.functional as F\n\n"
      "def classification_loss(logits, targets):\n"
      "    return F.cross_entropy(logits, targets, reduction='none')\n")
SEED_NOISE = 0.03  # |Δ mean test accuracy| the same objective shows between row orders


def _code(name: str) -> str:
    text = (CHEATS / f"{name}.py").read_text()
    return (text.replace("__CLEAN_LABELS__", str(digits_split()[1].tolist()))
            .replace("__EPOCHS__", str(EPOCHS)))


def _accuracy(results) -> float:
    assert [r.status for r in results] == ["ok"] * len(SEEDS), [r.error for r in results]
    return float(np.mean([r.metrics["test_acc"] for r in results]))


@pytest.fixture(scope="module")
def ce_sandboxed() -> float:
    return _accuracy(run_cells_sandboxed(SUITE, CE, "ce.py", {}, [VARIANT], SEEDS))


@pytest.mark.slow
def test_the_order_cheat_works_on_rows_in_the_public_order(tmp_path, ce_sandboxed):
    """In-process (trusted code only) the hook sees rows in the public order: the cheat
    recovers it and trains on clean labels. This is what the secret row order prevents."""
    path = tmp_path / "order_labels.py"
    path.write_text(_code("order_labels"))
    cheat = _accuracy(run_cells(SUITE, load_objective(str(path)), [VARIANT], SEEDS))
    assert cheat > ce_sandboxed + 0.05, (cheat, ce_sandboxed)  # 0.92 against 0.84


@pytest.mark.slow
@pytest.mark.parametrize("name,found", [("order_labels", "order not recovered"),
                                        ("frames", "found nothing"),
                                        ("members_vote", "members found: 1")])
def test_a_cheat_scores_as_plain_ce(name, found, ce_sandboxed):
    results = run_cells_sandboxed(SUITE, _code(name), f"{name}.py", {}, [VARIANT], SEEDS)
    assert abs(_accuracy(results) - ce_sandboxed) < SEED_NOISE
    for r in results:
        assert found in r.captured, r.captured[-2000:]


@pytest.mark.slow
def test_under_a_draws_key_the_order_cheat_finds_nothing_even_in_public_row_order(
        tmp_path, monkeypatch, capfd):
    """A loss that knows which samples its batch holds knows their clean labels (the issue's
    routes: `state` across epochs, `progress`, a histogram of the targets). Here it is
    handed that advantage outright: trusted, in-process, rows in place. Under a draws key
    (harness.contract.draws) the split, the noise and the order are the key's, so the
    public tables it ships match nothing and it scores as CE under the same key."""
    path = tmp_path / "order_labels.py"
    path.write_text(_code("order_labels"))  # the public clean labels: all it can know
    monkeypatch.setenv("HARNESS_DRAWS_KEY", "a-key-for-the-tests-only")
    ce = _accuracy(run_cells(SUITE, load_objective("ce"), [VARIANT], SEEDS))
    capfd.readouterr()
    cheat = _accuracy(run_cells(SUITE, load_objective(str(path)), [VARIANT], SEEDS))
    printed = capfd.readouterr().out
    assert "order recovered" not in printed.replace("not recovered", "")
    assert abs(cheat - ce) < SEED_NOISE, (cheat, ce)


RECORD = """import numpy as np

def posthoc_calibration(val_logits, val_targets, test_logits):
    with open(__OUT__, "ab") as f:
        np.save(f, test_logits.numpy())
    return test_logits.softmax(-1)
"""


@pytest.mark.slow
def test_under_a_draws_key_the_calibration_lookup_table_finds_nothing(tmp_path, monkeypatch,
                                                                       capfd):
    """The issue's lookup calibrator: on public draws a table of the reference model's test
    logits gives ECE 0 at 100% accuracy; under a key it finds no row and calibrates as the
    identity (the reference's own probabilities)."""
    from suites.calibration import data as cal_data

    suite, seeds = get_suite("calibration").shortened(3), [0, 1, 2]
    out = tmp_path / "logits.npy"
    (tmp_path / "record.py").write_text(RECORD.replace("__OUT__", repr(str(out))))
    run_cells(suite, load_objective(str(tmp_path / "record.py")), ["digits"], seeds)
    labels = cal_data.load("digits").y_test
    table = {}
    with open(out, "rb") as f:
        for _ in seeds:  # one call per member, every test row (clean, then shifted) at once
            for r, row in enumerate(np.load(f).tolist()):
                table[hash(tuple(round(v, 4) for v in row))] = int(labels[r % len(labels)])
    cheat = tmp_path / "calibration_lookup.py"
    cheat.write_text((CHEATS / "calibration_lookup.py").read_text()
                     .replace("__TABLE__", repr(table)))

    def ece(objective: str) -> tuple[float, float]:
        results = run_cells(suite, load_objective(objective), ["digits"], seeds)
        assert [r.status for r in results] == ["ok"] * len(seeds)
        return tuple(float(np.mean([r.metrics[m] for r in results])) for m in ("ece", "accuracy"))

    public = ece(str(cheat))
    assert public[0] < 0.001 and public[1] == 1.0  # the cheat works on public draws
    monkeypatch.setenv("HARNESS_DRAWS_KEY", "a-key-for-the-tests-only")
    capfd.readouterr()
    keyed = ece(str(cheat))
    assert "found 0 of" in capfd.readouterr().out
    assert keyed == pytest.approx(ece("identity"), abs=1e-9)  # the reference's probabilities
    assert keyed[0] > ece("temperature")[0]  # no better than the best honest calibrator
