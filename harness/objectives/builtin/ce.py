"""Cross-entropy (CE), the standard negative log-likelihood baseline."""

import torch


def classification_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """CE: ``-log p_y`` per sample, with ``log p = log_softmax(z)``.

    Source: ``torch.nn.CrossEntropyLoss(reduction="none")``.
    """
    return -logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
