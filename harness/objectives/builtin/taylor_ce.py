"""Taylor cross-entropy (order-t Taylor series of CE around p_y=1), Feng et al. IJCAI 2020.

Not the Kaggle "TaylorCrossEntropyLoss", which is CE over a Taylor-softmax.

Search space: t in {1, ..., 10} (int; range ours): t = 1 is MAE, higher orders approach CE;
2 is the default here.
"""

import torch

SEARCH_SPACE = {
    "t": {"low": 1, "high": 10},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, t: int = 2
) -> torch.Tensor:
    """Taylor-CE: ``sum_{k=1}^{t} (1 - p_y)^k / k``; t=1 is MAE, t -> inf is CE.

    Source: Feng et al., "Can cross entropy loss be robust to label noise?" (IJCAI 2020).
    """
    r = 1 - logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return sum(r**k / k for k in range(1, t + 1))
