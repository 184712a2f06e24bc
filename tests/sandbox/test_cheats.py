"""Objectives that try to raise their score without any forbidden action score as honest
ones do.

Only the loss runs in the sandbox (docs/sandbox.md): the server of one member gets that
member's batch — its logits, targets and asked-for context, rows in a secret order — and
nothing else. Each file in tests/sandbox/cheats/ tries a way the previous protocol left open
(the trainer's data order, its frames, the other members' labels) and prints what it
found; here its cells must score like cross-entropy on the same seeds, and the printout
must show it found nothing. The first test shows the order cheat is real: given rows in
the public order (as a trusted in-process hook is), it beats CE by a wide margin.

Public draws are also a public answer key, whatever the row order: the batch's samples
(found by the targets' histogram, by ``progress``, or by ``state`` across epochs), the
post-hoc track's test logits, the TTA stream's features. Each such cheat works on public
draws and, under a draws key (harness.contract.draws, what a server ranks on), scores as
the honest objective it falls back to.
"""

from __future__ import annotations

import dataclasses
import os
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


KEY = "a-key-for-the-tests-only"


@pytest.fixture(scope="module")
def ce_keyed() -> float:
    """CE under the tests' draws key (in-process: the same numbers as sandboxed)."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("HARNESS_DRAWS_KEY", KEY)
        return _accuracy(run_cells(SUITE, load_objective("ce"), [VARIANT], SEEDS))


def _batch_lookup(route: str) -> str:
    """tests/sandbox/cheats/batch_lookup.py with the public noisy draws of SEEDS."""
    from suites.noisy_labels.pipeline import load_dataset, noisy_labels

    assert "HARNESS_DRAWS_KEY" not in os.environ  # the cheat ships the *public* draws
    data = load_dataset("digits", None, False)
    noisy = [noisy_labels(data, SUITE.variant(VARIANT), s).tolist() for s in SEEDS]
    return (_code("batch_lookup").replace("__ROUTE__", repr(route))
            .replace("__NOISY_LABELS__", str(noisy)))


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
        tmp_path, monkeypatch, capfd, ce_keyed):
    """A loss that knows which samples its batch holds knows their clean labels (the issue's
    routes: `state` across epochs, `progress`, a histogram of the targets). Here it is
    handed that advantage outright: trusted, in-process, rows in place. Under a draws key
    (harness.contract.draws) the split, the noise and the order are the key's, so the
    public tables it ships match nothing and it scores as CE under the same key."""
    path = tmp_path / "order_labels.py"
    path.write_text(_code("order_labels"))  # the public clean labels: all it can know
    monkeypatch.setenv("HARNESS_DRAWS_KEY", KEY)
    capfd.readouterr()
    cheat = _accuracy(run_cells(SUITE, load_objective(str(path)), [VARIANT], SEEDS))
    printed = capfd.readouterr().out
    assert "order recovered" not in printed.replace("not recovered", "")
    assert abs(cheat - ce_keyed) < SEED_NOISE, (cheat, ce_keyed)


@pytest.mark.slow
@pytest.mark.parametrize("route", ["histogram", "state"])
def test_the_batch_lookups_find_their_clean_labels_through_the_sandbox_on_public_draws(
        route, ce_sandboxed):
    """The issue's routes (c) and (a), rows in the secret order: the targets' histogram
    alone names the batch (no state, no progress), or each row's state follows its sample
    across epochs until one sample fits; its clean labels follow."""
    results = run_cells_sandboxed(SUITE, _batch_lookup(route), "lookup.py", {},
                                  [VARIANT], SEEDS)
    assert all("batch found" in r.captured for r in results)
    cheat = _accuracy(results)  # the state route names its rows from the third epoch on
    assert cheat > ce_sandboxed + SEED_NOISE, (cheat, ce_sandboxed)


@pytest.mark.slow
@pytest.mark.parametrize("route", ["histogram", "progress", "state"])
def test_under_a_draws_key_the_batch_lookups_score_as_keyed_ce(route, ce_keyed,
                                                               monkeypatch):
    """Routes (c), (b) and (a) under the key: no candidate batch matches, CE's score."""
    code = _batch_lookup(route)
    monkeypatch.setenv("HARNESS_DRAWS_KEY", KEY)
    results = run_cells_sandboxed(SUITE, code, "lookup.py", {}, [VARIANT], SEEDS)
    for r in results:
        assert "batch found" not in r.captured and "batch not found" in r.captured
    assert abs(_accuracy(results) - ce_keyed) < SEED_NOISE, (_accuracy(results), ce_keyed)


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
    monkeypatch.setenv("HARNESS_DRAWS_KEY", KEY)
    capfd.readouterr()
    keyed = ece(str(cheat))
    assert "found 0 of" in capfd.readouterr().out
    assert keyed == pytest.approx(ece("identity"), abs=1e-9)  # the reference's probabilities
    assert keyed[0] > ece("temperature")[0]  # no better than the best honest calibrator


RECORD_TTA = """import numpy as np

def tta_adjust(probs, features, *, progress: float):
    with open(__OUT__, "ab") as f:
        np.save(f, features.numpy())
    return probs
"""


@pytest.mark.slow
def test_under_a_draws_key_the_tta_lookup_table_finds_nothing(tmp_path, monkeypatch, capfd):
    """The issue's TTA lookup: on public draws a table of the source model's features on the
    stream gives an online error near 0; under a key it finds no row and is the identity,
    BN-1's error exactly (test-batch statistics, no step). One seed, a chunk of one: the
    key's fixtures (a corrupted pool, a source model) are built for it."""
    from suites.tta.pipeline import TestTimeAdaptation

    # chunks of one seed: under the key a single source model is built (and the pool)
    suite, seeds = dataclasses.replace(get_suite("tta"), chunk=1), [0]
    out = tmp_path / "features.npy"
    (tmp_path / "record.py").write_text(RECORD_TTA.replace("__OUT__", repr(str(out))))
    run_cells(suite, load_objective(str(tmp_path / "record.py")), ["iid"], seeds)
    # the seed trains in its chunk (harness.contract.chunks): one call per member and batch
    chunk = list(range(suite.chunk))
    job = TestTimeAdaptation().prepare(suite, [suite.variant("iid")], chunk)[0]
    table = {}
    with open(out, "rb") as f:
        for start, _ in job.plan["batches"]:
            for labels in job.private.labels:
                for r, row in enumerate(np.load(f).tolist()):
                    table[hash(tuple(round(v, 3) for v in row))] = int(labels[start + r])
    cheat = tmp_path / "tta_lookup.py"
    cheat.write_text((CHEATS / "tta_lookup.py").read_text().replace("__TABLE__", repr(table)))

    def error(objective: str) -> float:
        results = run_cells(suite, load_objective(objective), ["iid"], seeds)
        assert [r.status for r in results] == ["ok"], [r.error for r in results]
        return results[0].metrics["online_error"]

    assert error(str(cheat)) < 0.01  # the cheat works on public draws
    monkeypatch.setenv("HARNESS_DRAWS_KEY", KEY)
    capfd.readouterr()
    keyed = error(str(cheat))
    assert "found 0 of 64" in capfd.readouterr().out
    # the identity over test-batch statistics: BN-1's error, an honest baseline's
    assert keyed == error("bn_stats") > 0.1
