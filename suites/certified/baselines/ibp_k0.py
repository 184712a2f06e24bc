"""IBP training with κ ramped to 0 (pure robust loss at ε_train), Gowal et al. 2018.

Search space: final_kappa in [0, 0.5], between this file's 0 and Gowal et al.'s 0.5 (the two
IBP settings of the CROWN-IBP README); the same range as ibp, so tuned, the two coincide.
"""

import torch
import torch.nn.functional as F

SEARCH_SPACE = {
    "final_kappa": {"low": 0.0, "high": 0.5},
}


def certified_loss(
    logits: torch.Tensor,
    worst_logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    eps: float,
    eps_max: float,
    final_kappa: float = 0.0,
) -> torch.Tensor:
    """``κ·CE(z, y) + (1 − κ)·CE(z̲, y)`` with κ = 1 − (1 − κ_final)·ε_t/ε_max, κ_final = 0.

    The κ = 0 end point of the IBP family: natural CE in the warm-up (at ε_t = 0 the
    robust CE equals CE), only the robust cross-entropy ``log(1 + Σ_{j≠y} exp(−m̲_j))``
    once ε_t = ε_train. Trades clean accuracy for verified accuracy relative to ``ibp``.

    Source: Gowal et al. 2018 (κ ∈ {0.5, 0} ablation); CROWN-IBP ``final-kappa``.
    """
    kappa = 1.0 - (1.0 - final_kappa) * min(eps / eps_max, 1.0) if eps_max > 0 else 1.0
    natural = F.cross_entropy(logits, targets, reduction="none")
    robust = F.cross_entropy(worst_logits, targets, reduction="none")
    return kappa * natural + (1.0 - kappa) * robust
