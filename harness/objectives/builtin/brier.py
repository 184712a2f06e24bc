"""Brier score as a training loss (Brier 1950), as trained by Mukhoti et al. 2020."""

import torch


def classification_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Brier: ``sum_k (p_k - 1[k = y])^2`` with ``p = softmax(logits)``: a strictly proper
    scoring rule of quadratic curvature (the squared error of the probability vector).
    Source: torrvision/focal_calibration ``Losses/brier_score.py`` (summed over classes,
    averaged over the batch).
    """
    p = logits.softmax(-1)
    onehot = torch.nn.functional.one_hot(targets, p.shape[-1]).to(p.dtype)
    return ((p - onehot) ** 2).sum(-1)
