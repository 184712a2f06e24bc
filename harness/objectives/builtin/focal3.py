"""Focal loss for calibration, Mukhoti et al. 2020 (gamma=3, full gradient).

Search space: gamma in [1, 3], Mukhoti et al. 2020's fixed gammas (FL-1, FL-2, FL-3 in the
reference's train_scripts).
"""

import torch

SEARCH_SPACE = {
    "gamma": {"low": 1.0, "high": 3.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, gamma: float = 3.0
) -> torch.Tensor:
    """Focal: ``-(1 - p_y)^gamma * log p_y``, the modulating factor NOT detached.

    This is the calibration literature's focal loss (gradient through ``(1 - p_y)^gamma``
    too), unlike ``focal``, the label-noise literature's (APL: factor detached, gamma 0.5).
    gamma=3 is Mukhoti et al.'s fixed-gamma setting. Per sample (the trainer averages;
    the reference sums over the batch). Source: torrvision/focal_calibration
    ``Losses/focal_loss.py``.
    """
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return -((1 - log_p_y.exp()) ** gamma) * log_p_y
