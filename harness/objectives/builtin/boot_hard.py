"""Hard bootstrapping, Reed et al. 2015 (target mixed with the model's argmax class)."""

import torch


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
