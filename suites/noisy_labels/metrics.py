"""The noisy-label suite's metrics of one member, from its predicted classes (the judge
recomputes them from the returned weights): test accuracy, final and best over epochs,
clean-label training accuracy, and on the flipped training samples how often the model
predicts the noisy label (memorization) or the clean one (correction)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from suites.noisy_labels.pipeline import Dataset


def judge_member(data: Dataset, noisy: np.ndarray, eval_predictions: np.ndarray,
                 train_predictions: np.ndarray) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Metrics and the test-accuracy curve of one member from its predictions: [E, Ne] per
    epoch on test, [N] on train; ``noisy`` [N], the labels it trained on."""
    _check_predictions(eval_predictions, (eval_predictions.shape[0], len(data.y_test)),
                       data.num_classes)
    _check_predictions(train_predictions, (len(data.y_train),), data.num_classes)
    test_acc = (eval_predictions == data.y_test[None, :]).mean(axis=1)
    flipped = noisy != data.y_train
    metrics = {
        "test_acc": float(test_acc[-1]),
        "best_test_acc": float(test_acc.max()),
        "best_epoch": float(test_acc.argmax() + 1),
        "noise_rate": float(flipped.mean()),
        "train_acc_clean": float((train_predictions == data.y_train).mean()),
    }
    if flipped.any():
        metrics["memorization"] = float((train_predictions[flipped] == noisy[flipped]).mean())
        metrics["correction"] = float(
            (train_predictions[flipped] == data.y_train[flipped]).mean())
    return metrics, {"test_acc": test_acc.tolist()}


def _check_predictions(pred: np.ndarray, shape: tuple[int, ...], num_classes: int) -> None:
    if pred.shape != shape or pred.dtype.kind not in "iu":
        raise ValueError(f"predictions must be integer class ids of shape {shape}, "
                         f"got {pred.dtype} {pred.shape}")
    if pred.size and (pred.min() < 0 or pred.max() >= num_classes):
        raise ValueError(f"predictions must lie in [0, {num_classes - 1}]")
