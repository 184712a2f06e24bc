"""Dual focal loss, Tao, Dong and Xu 2023, "Dual Focal Loss for Calibration" (ICML; gamma=5).

Search space: gamma in [2, 6.5], covering the per-model gammas the paper tuned (2.3 to 6.1,
as above); 5 is its most common value.
"""

import torch

SEARCH_SPACE = {
    "gamma": {"low": 2.0, "high": 6.5},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, gamma: float = 5.0
) -> torch.Tensor:
    """Dual focal: ``-(1 - p_y + p_j)^gamma * log p_y``, the factor NOT detached.

    ``p_j`` is "the highest logit ranked after the ground truth": the largest probability
    strictly below ``p_y`` (0 when none is), as in the official code's mask
    ``softmax < p_y``. It is the runner-up only when the target is the argmax; when the
    target is not, it is the class ranked just below the target, not the argmax. The paper
    tunes gamma per data set and model (official README: 2.3 to 6.1); 5 is its value for
    ResNet-50 on CIFAR-10 and CIFAR-100 and DenseNet-121 on CIFAR-10, and the most common
    one (the class's own default, 0, is plain cross-entropy). Per sample (the trainer
    averages; the reference sums over the batch). Source: Linwei94/DualFocalLoss
    ``dual_focal_loss.py``.
    """
    log_p = logits.log_softmax(-1)
    p = log_p.exp()
    log_p_y = log_p.gather(-1, targets[:, None]).squeeze(-1)
    p_y = p.gather(-1, targets[:, None])
    p_j = torch.where(p < p_y, p, torch.zeros_like(p)).amax(-1)
    return -((1 - p_y.squeeze(-1) + p_j) ** gamma) * log_p_y
