"""Normalized CE + reverse CE (NCE+RCE), the APL active-passive loss, Ma et al. 2020.

Search space (log): alpha in [0.1, 10], beta in [0.1, 100], Ma et al. 2020's grid (alpha in
{0.1, 1, 10}, beta in {0.1, 1, 10, 100}, picked on a validation split).
"""

import math

import torch

# RCE clips log(0) in the one-hot label to log(1e-4), as APL does.
_A = -math.log(1e-4)


SEARCH_SPACE = {
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "beta": {"low": 0.1, "high": 100.0, "log": True},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, alpha: float = 1.0, beta: float = 1.0
) -> torch.Tensor:
    """NCE+RCE: ``alpha * log p_y / sum_k log p_k + beta * (-log 1e-4) * (1 - p_y)``.

    Defaults: the CIFAR-10 config (CIFAR-100: alpha=10, beta=0.1; MNIST: alpha=1,
    beta=10). Source: Active-Passive-Losses ``NCEandRCE``.
    """
    log_p = logits.log_softmax(-1)
    log_p_y = log_p.gather(-1, targets[:, None]).squeeze(-1)
    nce = log_p_y / log_p.sum(-1)
    return alpha * nce + beta * _A * (1 - log_p_y.exp())
