"""Interval bound propagation training (IBP), Gowal et al. 2018: κ from 1 to 0.5.

Search space: final_kappa in [0, 0.5], between Gowal et al.'s 0.5 and the 0 that Zhang et
al. 2020 (CROWN-IBP README) also train IBP with; the same range as ibp_k0, so tuned, the two
coincide.
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
    final_kappa: float = 0.5,
) -> torch.Tensor:
    """``κ·CE(z, y) + (1 − κ)·CE(z̲, y)`` per sample, with z̲ the IBP worst-case logits.

    ``CE(z̲, y) = log(1 + Σ_{j≠y} exp(−m̲_j))`` is the robust cross-entropy on the IBP
    margin lower bounds m̲. κ = 1 − (1 − κ_final)·ε_t/ε_max: 1 during the natural
    warm-up, then linearly to κ_final as ε_t ramps (the nominal weight 1→0.5 and
    verified weight 0→0.5 of the reference). This is exactly the suite's lift of ``ce``.

    Source: google-deepmind/interval-bound-propagation ``examples/train.py``
    (``nominal_xent_init=1, _final=.5; verified_xent_init=0, _final=.5``).
    """
    kappa = 1.0 - (1.0 - final_kappa) * min(eps / eps_max, 1.0) if eps_max > 0 else 1.0
    natural = F.cross_entropy(logits, targets, reduction="none")
    robust = F.cross_entropy(worst_logits, targets, reduction="none")
    return kappa * natural + (1.0 - kappa) * robust
