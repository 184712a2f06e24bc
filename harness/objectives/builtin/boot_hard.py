"""Hard bootstrapping, Reed et al. 2015 (target mixed with the model's argmax class).

Search space: beta in [0.6, 1.0] (range ours) around Reed et al.'s 0.8, which they picked on
validation data; 1 is CE.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 0.6, "high": 1.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, beta: float = 0.8
) -> torch.Tensor:
    """Hard bootstrap: ``-beta log p_y - (1 - beta) log p_{argmax_k p_k}``; beta=1 gives CE.

    Source: YisenWang/symmetric_cross_entropy ``boot_hard`` (beta=0.8).
    """
    log_p = logits.log_softmax(-1)
    log_p_y = log_p.gather(-1, targets[:, None]).squeeze(-1)
    log_p_top = log_p.gather(-1, logits.argmax(-1, keepdim=True)).squeeze(-1)
    return -beta * log_p_y - (1 - beta) * log_p_top
