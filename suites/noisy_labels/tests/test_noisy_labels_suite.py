"""The noisy-label suite end to end: the known effects of label noise reproduce (on 2
seeds here; on the protocol's 5 in `make reproduce`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.report import stats
from harness.runner.inprocess import run_cells

SUITE = get_suite("noisy-labels")
SEEDS = [0, 1, 2, 3, 4]
# The small version: the real protocol on seeds 0 and 1 alone (a member chunk of 2; ce's
# and gce's numbers for those seeds are the same as in chunks of 5), 2/5 of the training.
SMALL = dataclasses.replace(SUITE, chunk=2)
SMALL_SEEDS = [0, 1]


def _sym04(suite, seeds):
    return {name: run_cells(suite, load_objective(name), ["sym-0.4"], seeds)
            for name in ("ce", "gce")}


@pytest.fixture(scope="module")
def sym04():
    """CE and GCE on sym-0.4 with the real protocol (100 epochs, 5 seeds)."""
    return _sym04(SUITE, SEEDS)


@pytest.fixture(scope="module")
def sym04_small():
    """CE and GCE on sym-0.4, 100 epochs, seeds 0 and 1 (suites/noisy_labels/README.md:
    the figures of both sizes)."""
    return _sym04(SMALL, SMALL_SEEDS)


def _metric(cells, name):
    return np.array([c.metrics[name] for c in sorted(cells, key=lambda c: c.seed)])


def _gce_beats_ce(runs):
    ce, gce = _metric(runs["ce"], "test_acc"), _metric(runs["gce"], "test_acc")
    comparison = stats.compare_paired(gce, ce)
    assert comparison.prob_improvement >= 0.9
    assert comparison.distinguishable


def _ce_memorizes_late(runs):
    cells = runs["ce"]
    gap = _metric(cells, "best_test_acc") - _metric(cells, "test_acc")
    assert gap.mean() >= 0.10
    assert _metric(cells, "memorization").mean() > 0.5
    assert _metric(runs["gce"], "memorization").mean() < 0.3


@pytest.mark.slow
@pytest.mark.reproduce
def test_gce_beats_ce_under_symmetric_noise(sym04):
    _gce_beats_ce(sym04)


@pytest.mark.slow
def test_gce_beats_ce_under_symmetric_noise_on_2_seeds(sym04_small):
    _gce_beats_ce(sym04_small)


@pytest.mark.slow
@pytest.mark.reproduce
def test_ce_memorizes_noise_late_in_training(sym04):
    _ce_memorizes_late(sym04)


@pytest.mark.slow
def test_ce_memorizes_noise_late_in_training_on_2_seeds(sym04_small):
    _ce_memorizes_late(sym04_small)


@pytest.mark.slow
def test_cells_are_complete_and_paired(sym04_small):
    for cells in sym04_small.values():
        assert [c.seed for c in cells] == SMALL_SEEDS
        assert all(c.status == "ok" and c.info["mode"] == "vmap" for c in cells)
        assert all(len(c.curves["test_acc"]) == SUITE.settings["epochs"] for c in cells)
    # Paired seeds: every objective saw the same noise draw for seed k.
    ce, gce = sym04_small["ce"], sym04_small["gce"]
    assert np.array_equal(_metric(ce, "noise_rate"), _metric(gce, "noise_rate"))
    assert np.allclose(_metric(ce, "noise_rate"), 0.4, atol=0.005)


def test_classification_loss_from_a_file_runs_on_the_suite(tmp_path):
    path = tmp_path / "my_loss.py"
    path.write_text("import torch.nn.functional as F\n"
                    "def classification_loss(logits, targets, *, t: float = 2.0):\n"
                    "    return F.cross_entropy(logits / t, targets, reduction='none')\n")
    suite = SUITE.shortened(2)
    cells = run_cells(suite, load_objective(str(path)), ["clean", "asym-0.2"], [0, 1])
    assert [(c.variant, c.seed, c.status) for c in cells] == [
        ("clean", 0, "ok"), ("clean", 1, "ok"), ("asym-0.2", 0, "ok"), ("asym-0.2", 1, "ok")]
    assert all(0.0 <= c.metrics["test_acc"] <= 1.0 for c in cells)
    assert "memorization" not in cells[0].metrics and "memorization" in cells[2].metrics


def test_a_failing_objective_fails_its_cells_with_the_users_traceback(tmp_path):
    path = tmp_path / "bad_loss.py"
    path.write_text("def classification_loss(logits, targets):\n"
                    "    return logits.softmax(-1).undefined_method()\n")
    cells = run_cells(SUITE.shortened(1), load_objective(str(path)), ["clean"], [0, 1])
    assert [c.status for c in cells] == ["failed", "failed"]
    assert "AttributeError" in cells[0].error
    assert "undefined_method()" in cells[0].error
    assert "bad_loss.py" in cells[0].error


def test_variant_hash_depends_on_protocol_and_config():
    v = SUITE.variant("sym-0.4")
    assert v.config_hash(SUITE) != v.config_hash(SUITE.shortened(2))
    assert v.config_hash(SUITE) != SUITE.variant("sym-0.2").config_hash(SUITE)
    assert v.config_hash(SUITE) == get_suite("noisy-labels").variant("sym-0.4").config_hash(SUITE)


def test_unknown_variant_names_the_available_ones():
    with pytest.raises(KeyError, match="sym-0.4"):
        SUITE.variant("sym-0.9")


def test_real_data_variants_run_end_to_end_on_fixture_files(tmp_path):
    """MNIST and CIFAR-10(N) variants through the suite, on small files in the real formats."""
    from tests.engine.test_real_data import make_cifar10, make_cifar10n, make_mnist

    mnist = make_mnist(tmp_path, n_train=40, n_test=10)
    make_cifar10(tmp_path, per_batch=4, n_test=6)
    human = make_cifar10n(tmp_path / "CIFAR-10_human.pt", n=20)
    suite = SUITE.shortened(1)
    variants = ["mnist/sym-0.4", "cifar10/sym-0.4", "cifar10n/worst"]
    cells = run_cells(suite, load_objective("ce"), variants, [0, 1], data_root=str(tmp_path))
    assert [(c.variant, c.status) for c in cells] == [(v, "ok") for v in variants for _ in "ab"]
    by_variant = {c.variant: c for c in cells}
    assert by_variant["mnist/sym-0.4"].metrics["noise_rate"] == pytest.approx(
        int(int(0.4 * 40) / 10) * 10 / 40)
    # CIFAR-10N labels come from the file, not from a seed.
    from harness.data.real import load_cifar10
    clean = load_cifar10(tmp_path).y_train
    assert by_variant["cifar10n/worst"].metrics["noise_rate"] == pytest.approx(
        float(np.mean(human["worse_label"] != clean)))
    assert len(mnist["train_y"]) == 40


def test_missing_real_data_says_where_to_put_it(tmp_path):
    from harness.data.real import DatasetMissing

    with pytest.raises(DatasetMissing, match="--download"):
        run_cells(SUITE.shortened(1), load_objective("ce"), ["mnist/sym-0.4"], [0],
                                     data_root=str(tmp_path))
