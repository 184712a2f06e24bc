"""Known-answer tests for the noisy-label judge (metrics computed outside the objective)."""

import numpy as np
import pytest

from suites.noisy_labels.pipeline import Dataset
from suites.noisy_labels.pipeline import judge_member as judge

Y_TRAIN = np.array([0, 1, 2, 0, 1, 2, 0, 1])
# flipped: index 1 (1→2), 3 (0→1), 6 (0→2)
NOISY = np.array([0, 2, 2, 1, 1, 2, 2, 1])
# flipped predictions: 1 → 2 (noisy, memorized), 3 → 0 (clean, corrected), 6 → 2 (memorized)
# vs clean labels: right at 0, 2, 3, 4, 7 → 5/8
TRAIN_PRED = np.array([0, 2, 2, 0, 1, 1, 2, 1])
Y_TEST = np.array([0, 1, 2, 1])
EVAL_PRED = np.array([
    [0, 0, 0, 0],  # 1/4
    [0, 1, 2, 0],  # 3/4  <- first best
    [0, 1, 2, 2],  # 3/4  (tie: best_epoch stays the first)
    [0, 1, 0, 0],  # 2/4  <- last
])


def dataset() -> Dataset:
    x_train = np.zeros((len(Y_TRAIN), 2), dtype=np.float32)
    x_test = np.zeros((len(Y_TEST), 2), dtype=np.float32)
    return Dataset(x_train, Y_TRAIN, x_test, Y_TEST, num_classes=3)


def test_judge_known_metrics():
    result = judge(dataset(), NOISY, EVAL_PRED, TRAIN_PRED)
    assert result.status == "ok"
    assert result.metrics == pytest.approx({
        "test_acc": 0.5,
        "best_test_acc": 0.75,
        "best_epoch": 2.0,
        "noise_rate": 0.375,
        "train_acc_clean": 0.625,
        "memorization": 2 / 3,
        "correction": 1 / 3,
    }, abs=1e-12)
    assert result.curves["test_acc"] == pytest.approx([0.25, 0.75, 0.75, 0.5])
    assert all(isinstance(v, float) for v in result.metrics.values())


def test_judge_no_noise_has_no_memorization_or_correction():
    result = judge(dataset(), Y_TRAIN.copy(), EVAL_PRED, TRAIN_PRED)
    assert result.metrics["noise_rate"] == 0.0
    assert result.metrics["train_acc_clean"] == 0.625
    assert result.metrics["test_acc"] == 0.5
    assert "memorization" not in result.metrics
    assert "correction" not in result.metrics


def test_judge_single_epoch_and_small_int_dtypes():
    result = judge(dataset(), NOISY, EVAL_PRED[1:2].astype(np.uint8),
                   TRAIN_PRED.astype(np.int32))
    assert result.metrics["test_acc"] == 0.75
    assert result.metrics["best_test_acc"] == 0.75
    assert result.metrics["best_epoch"] == 1.0
    assert result.metrics["memorization"] == pytest.approx(2 / 3)


def test_judge_all_memorized():
    result = judge(dataset(), NOISY, EVAL_PRED, NOISY.copy())
    assert result.metrics["memorization"] == 1.0
    assert result.metrics["correction"] == 0.0
    assert result.metrics["train_acc_clean"] == 0.625


@pytest.mark.parametrize(("eval_pred", "train_pred", "match"), [
    (EVAL_PRED[:, :3], TRAIN_PRED, r"shape \(4, 4\)"),             # test predictions too short
    (EVAL_PRED[0], TRAIN_PRED, r"shape \(4, 4\)"),                 # no epoch axis
    (EVAL_PRED, TRAIN_PRED[:7], r"shape \(8,\)"),                  # train predictions too short
    (EVAL_PRED, TRAIN_PRED[None, :], r"shape \(8,\)"),             # extra axis
    (EVAL_PRED.astype(np.float32), TRAIN_PRED, "integer class ids"),
    (EVAL_PRED, TRAIN_PRED.astype(np.float64), "integer class ids"),
    (EVAL_PRED, TRAIN_PRED.astype(bool), "integer class ids"),
    (EVAL_PRED + 1, TRAIN_PRED, r"\[0, 2\]"),                      # class 3 out of range
    (EVAL_PRED, TRAIN_PRED - 1, r"\[0, 2\]"),                      # class -1 out of range
])
def test_judge_rejects_bad_predictions(eval_pred, train_pred, match):
    with pytest.raises(ValueError, match=match):
        judge(dataset(), NOISY, eval_pred, train_pred)
