"""CROWN-IBP training, Zhang et al. 2020: bounds blend CROWN-IBP→IBP (β 1→0), κ 1→0.5.

Search space: final_beta in [0, 1] and final_kappa in [0, 0.5], between the settings Zhang
et al. 2020 compare (beta_final 0 or 1, kappa_final 0 or 0.5: the reference's defaults.json,
configs and README).
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F

SEARCH_SPACE = {
    "final_beta": {"low": 0.0, "high": 1.0},
    "final_kappa": {"low": 0.0, "high": 0.5},
}


def certified_loss(
    logits: torch.Tensor,
    worst_logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    eps: float,
    eps_max: float,
    crown_ibp_worst_logits: Callable[[], torch.Tensor],
    final_beta: float = 0.0,
    final_kappa: float = 0.5,
) -> torch.Tensor:
    """``κ·CE(z, y) + (1 − κ)·CE(−m̲, y)`` with ``m̲ = β·m̲_CROWN-IBP + (1 − β)·m̲_IBP``.

    Worst-case logits are −m̲, so the blend is taken on them directly. Both weights
    follow the ε ramp: β = 1 − (1 − β_final)·ε_t/ε_max (tight CROWN-IBP bounds while ε
    is small, IBP at ε_train) and κ = 1 − (1 − κ_final)·ε_t/ε_max ("robust_natural").
    ``crown_ibp_worst_logits()`` computes the CROWN-IBP bounds when called; like the
    reference, they are skipped once β is (nearly) 0.

    Source: huanzhang12/CROWN-IBP ``train.py`` (``final-beta = 0``, ``final-kappa = 0.5``);
    auto_LiRPA ``examples/vision/simple_training.py``.
    """
    ratio = min(eps / eps_max, 1.0) if eps_max > 0 else 0.0
    beta = 1.0 - (1.0 - final_beta) * ratio
    kappa = 1.0 - (1.0 - final_kappa) * ratio
    worst = worst_logits
    if beta >= 1e-5:
        worst = beta * crown_ibp_worst_logits() + (1.0 - beta) * worst_logits
    natural = F.cross_entropy(logits, targets, reduction="none")
    robust = F.cross_entropy(worst, targets, reduction="none")
    return kappa * natural + (1.0 - kappa) * robust
