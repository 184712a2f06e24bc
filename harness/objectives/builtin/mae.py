"""Mean absolute error on the softmax (MAE), APL's "reduced" robust loss.

Identical to the "-p" objective of Beyond Log-Likelihood (Li et al. 2025), applied
per sample instead of per token; equals GCE with q=1 and Taylor-CE with t=1.

Search space: none. scale only multiplies the loss: under the noisy-labels suite's SGD a
step with scale s, learning rate lr and weight decay wd is the step with scale 1, lr * s and
wd / s (up to gradient clipping), and a tuned run tunes lr and wd (APL keeps scale 1).
"""

import torch

SEARCH_SPACE = {
    "scale": {"fixed": "only scales the loss: under SGD the same as a change of learning rate and "
                       "weight decay, which the suite tunes"},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, scale: float = 1.0
) -> torch.Tensor:
    """MAE: ``scale * (1 - p_y)`` (= ``scale * ||p - e_y||_1 / 2``).

    Source: Active-Passive-Losses ``MeanAbsoluteError`` (scale 1 by default).
    """
    p_y = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return scale * (1 - p_y)
