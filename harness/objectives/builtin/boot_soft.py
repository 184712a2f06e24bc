"""Soft bootstrapping, Reed et al. 2015 (target mixed with the model's own prediction).

Search space: beta in [0.8, 1.0] (range ours) around Reed et al.'s 0.95, which they picked
on validation data; 1 is CE.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 0.8, "high": 1.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, beta: float = 0.95
) -> torch.Tensor:
    """Soft bootstrap: ``-sum_k [beta e_{y,k} + (1 - beta) p_k] log p_k``; beta=1 gives CE.

    No stop-gradient through the ``p_k`` weight, as in the reference.
    Source: YisenWang/symmetric_cross_entropy ``boot_soft`` (beta=0.95).
    """
    log_p = logits.log_softmax(-1)
    ce = -log_p.gather(-1, targets[:, None]).squeeze(-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return beta * ce + (1 - beta) * entropy
