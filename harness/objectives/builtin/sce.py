"""Symmetric cross-entropy (SCE = alpha*CE + beta*RCE), Wang et al. 2019.

Search space (log): alpha in [0.01, 10], beta in [0.1, 1.0], spanning Wang et al. 2019's
per-data-set settings (alpha 0.01 MNIST, 0.1 CIFAR-10, 6 CIFAR-100; beta 1 or 0.1), as the
APL configs keep them.
"""

import math

import torch

# RCE clips log(0) in the one-hot label to log(1e-4), as the official code and APL do.
_A = -math.log(1e-4)


SEARCH_SPACE = {
    "alpha": {"low": 0.01, "high": 10.0, "log": True},
    "beta": {"low": 0.1, "high": 1.0, "log": True},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, alpha: float = 0.1, beta: float = 1.0
) -> torch.Tensor:
    """SCE: ``alpha * (-log p_y) + beta * RCE`` with ``RCE = -log(1e-4) * (1 - p_y)``.

    ``RCE = -sum_k p_k log clamp(e_{y,k}, 1e-4, 1)``, written in closed form.
    Defaults: the CIFAR-10 config (CIFAR-100: alpha=6, beta=0.1; MNIST: alpha=0.01,
    beta=1). Source: Active-Passive-Losses ``SCELoss``; YisenWang/symmetric_cross_entropy.
    """
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return alpha * -log_p_y + beta * _A * (1 - log_p_y.exp())
