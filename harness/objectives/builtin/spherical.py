"""The spherical scoring rule as a training loss (Good 1971; Gneiting & Raftery 2007)."""

import torch


def classification_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Spherical: ``1 - p_y / ||p||_2`` with ``p = softmax(logits)``.

    The spherical score ``p_y / ||p||_2`` is strictly proper (Gneiting & Raftery 2007,
    eq. 20 with alpha = 2), bounded in [1/sqrt(K), 1]; one minus it is a loss in
    [0, 1 - 1/sqrt(K)], zero only for a confident correct prediction. Its curvature lies
    between the log score's (CE) and the quadratic score's (Brier).
    """
    p = logits.softmax(-1)
    p_y = p.gather(-1, targets[:, None]).squeeze(-1)
    return 1 - p_y / p.norm(dim=-1)
