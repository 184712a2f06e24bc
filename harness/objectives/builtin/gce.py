"""Generalized cross-entropy (GCE / L_q), Zhang & Sabuncu 2018.

The "-p^k" (GeneralFamily-k) objective of Beyond Log-Likelihood is GCE with q=k.
q -> 0 recovers CE, q = 1 gives MAE.

Search space: q in [0.1, 1.0], the L_q family from near-CE (q -> 0) to MAE (q = 1) of Zhang
& Sabuncu 2018, who run q = 0.7 (APL's configs too); Zhu et al. 2023's code tries q in
{0.05, 0.7, 0.95}.
"""

import torch

SEARCH_SPACE = {
    "q": {"low": 0.1, "high": 1.0},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, q: float = 0.7
) -> torch.Tensor:
    """GCE: ``(1 - p_y^q) / q`` with ``p_y`` clamped at 1e-7 before the power.

    Source: Active-Passive-Losses ``GeneralizedCrossEntropy`` (q=0.7 in all APL configs).
    """
    p_y = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1).clamp_min(1e-7)
    return (1 - p_y**q) / q
