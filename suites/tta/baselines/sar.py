"""SAR: sharpness-aware and reliable entropy minimisation, with model recovery.

Reliable entropy ``L = Σ_i 1[H_i < E₀] H_i / n_sel`` (``H_i = H(softmax(z_i))``,
``E₀ = e_margin · ln K``), minimised with a SAM step of radius ρ = 0.05, and the model reset
to the source when the EMA (0.9) of the loss at the perturbed weights falls below 0.2. Niu
et al., "Towards stable test-time adaptation in dynamic wild world" (ICLR 2023);
reference: github.com/mr-eggplant/SAR, ``sar.py`` (``margin_e0 = 0.4·ln K``,
``reset_constant_em = 0.2``, SAM ``rho = 0.05``).

The suite does the SAM step and the recovery (``MODEL`` below): it calls this hook again
on the perturbed model's logits, so the second call selects the reliable samples again at
the perturbed weights. Difference from the reference, which cannot be expressed through
the hook: there the second pass keeps only samples reliable at *both* weights (it indexes
the second entropies by the first selection, then filters again); here it is those
reliable at the perturbed weights.

Search space: e_margin in [0.2, 0.6] (range ours around SAR's 0.4; EATA's range likewise).
The SAM radius and reset threshold in MODEL are the suite's, not the hook's.
"""

import math

import torch
from torch import Tensor

MODEL = {"sharpness": 0.05, "reset_below": 0.2}


SEARCH_SPACE = {
    "e_margin": {"low": 0.2, "high": 0.6},
}


def tta_loss(logits: Tensor, *, e_margin: float = 0.4) -> Tensor:
    """``Σ_i 1[H_i < E₀] H_i / n_sel`` with ``E₀ = e_margin · ln K`` (default
    ``e_margin = 0.4``, the reference's ``0.4·ln K``).

    With no reliable sample the loss has zero gradient (the suite takes no step) and its
    value is the batch's mean entropy, detached (≥ E₀): the reference then leaves its loss
    EMA unchanged, which a hook cannot do; a value of 0 would drag the suite's EMA towards
    the reset threshold on exactly the batches where nothing is confident."""
    e0 = e_margin * math.log(logits.shape[-1])
    logp = logits.log_softmax(dim=-1)
    entropy = -(logp.exp() * logp).sum(dim=-1)
    reliable = (entropy < e0).to(logits.dtype)  # detached float mask (vmap-compatible)
    n = reliable.sum()
    loss = (reliable * entropy).sum() / n.clamp_min(1)
    return torch.where(n > 0, loss, entropy.detach().mean())
