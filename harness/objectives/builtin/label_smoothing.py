"""Label smoothing (LSR), Szegedy et al. 2016, in the PyTorch convention.

Search space: epsilon in [0, 0.3] (range ours): 0 is CE; Szegedy et al. 2016 and Müller et
al. 2019 use 0.1, Mukhoti et al. 2020 0.05 (LS-0.05).
"""

import torch

SEARCH_SPACE = {
    "epsilon": {"low": 0.0, "high": 0.3},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, epsilon: float = 0.1
) -> torch.Tensor:
    """LSR: ``-sum_k [(1 - epsilon) e_{y,k} + epsilon / K] log p_k``; epsilon=0 gives CE.

    Same as ``F.cross_entropy(..., label_smoothing=epsilon)``. (The SCE repo's ``lsr``
    puts ``1 - epsilon - epsilon/K`` on the label instead.)
    """
    log_p = logits.log_softmax(-1)
    ce = -log_p.gather(-1, targets[:, None]).squeeze(-1)
    return (1 - epsilon) * ce - epsilon * log_p.mean(-1)
