"""PGD adversarial training (Madry et al. 2018): empirical, not certified, robustness."""

import torch
import torch.nn.functional as F


def certified_loss(
    logits: torch.Tensor,
    worst_logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    adv_logits: torch.Tensor,
) -> torch.Tensor:
    """``CE(z(x_adv), y)`` per sample, x_adv from PGD at the current ε_t.

    The suite computes ``adv_logits``: 10 PGD steps of 2.5·ε_t/10 on CE from a uniform
    random start in the box (natural CE while ε_t = 0). The bounds are ignored: a
    contrast baseline with high PGD accuracy and, typically, low verified accuracy.

    Source: Madry et al., "Towards Deep Learning Models Resistant to Adversarial
    Attacks", ICLR 2018 (min-max objective, PGD with random start).
    """
    return F.cross_entropy(adv_logits, targets, reduction="none")
