"""Poly-1 loss (PolyLoss with one extra polynomial term), Leng et al. ICLR 2022.

Search space: epsilon in [-1, 4] (range ours), spanning the paper's reported choices: -1
(detection), 1 (the common default), 2 (ImageNet); 0 is CE.
"""

import torch

SEARCH_SPACE = {
    "epsilon": {"low": -1.0, "high": 4.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, epsilon: float = 1.0
) -> torch.Tensor:
    """Poly-1: ``-log p_y + epsilon * (1 - p_y)``; epsilon=0 gives CE.

    epsilon=1 is the common default (the paper: 2 for ImageNet, -1 for detection).
    Source: Leng et al., "PolyLoss" (ICLR 2022).
    """
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return -log_p_y + epsilon * (1 - log_p_y.exp())
