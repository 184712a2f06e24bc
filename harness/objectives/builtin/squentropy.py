"""Squentropy (CE + mean squared logit of the incorrect classes), Hui, Belkin & Wright 2023."""

import torch


def classification_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Squentropy: ``-log p_y + (1 / (K - 1)) * sum_{k != y} z_k^2`` (squares of LOGITS).

    Source: Like-Hui/Squentropy_vision ``svhn.py`` (``loss_type == 'sqen'``), rescale 1.
    """
    k = logits.shape[-1]
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    sq_y = logits.gather(-1, targets[:, None]).squeeze(-1) ** 2
    return -log_p_y + ((logits**2).sum(-1) - sq_y) / (k - 1)
