"""Focal loss, Lin et al. 2017, with APL's label-noise setting (gamma=0.5).

Search space: gamma in [0, 5], the span of Lin et al. 2017's gamma study ({0, 0.1, 0.2, 0.5,
1, 2, 5}); APL runs 0.5.
"""

import torch

SEARCH_SPACE = {
    "gamma": {"low": 0.0, "high": 5.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, gamma: float = 0.5
) -> torch.Tensor:
    """Focal: ``-(1 - sg(p_y))^gamma * log p_y``.

    The modulating factor ``(1 - p_y)^gamma`` is DETACHED (``sg``), as in APL's
    ``FocalLoss`` (it takes ``logpt.data.exp()``); this also avoids the infinite
    derivative of ``(1 - p)^gamma`` at ``p = 1`` for ``gamma < 1``. gamma=0 gives CE.
    Source: Active-Passive-Losses ``FocalLoss``.
    """
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    weight = (1 - log_p_y.detach().exp()) ** gamma
    return -weight * log_p_y
