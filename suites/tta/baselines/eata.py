"""EATA: efficient anti-forgetting test-time adaptation.

Samples are selected if reliable, ``H_i < E₀`` (``E₀ = e_margin · ln K``), and — once the
running mean prediction ``m`` exists — non-redundant, ``|cos(m, p_i)| < d_margin``; the
loss is their entropy reweighted by ``w_i = exp(E₀ − H_i)`` (detached), plus an
EWC-style Fisher anchor:

    L = Σ_sel w_i H_i / n_sel + α Σ_θ F_θ (θ − θ₀)²

and ``m ← 0.9 m + 0.1 mean_sel p_i`` (``m = mean_sel p_i`` the first time). With nothing
selected there is no step (the whole loss, Fisher term included, has zero gradient: the
reference skips ``backward``) and ``m`` is unchanged. Niu et al., "Efficient test-time
model adaptation without forgetting" (ICML 2022); reference: github.com/mr-eggplant/EATA,
``eata.py`` (``forward_and_adapt_eata``, ``update_model_probs``). As there, ``m`` is
updated with the samples that pass *both* filters (on the first batch, before ``m``
exists, only the entropy filter applies). Defaults: ``E₀ = 0.4 ln K`` (the reference's
ImageNet value ``ln(1000)/2 − 1`` is ≈ 0.4 ln 1000), and Döbler et al.'s CIFAR-10-C
setting ``d_margin = 0.4``, ``α = 1`` (github.com/mariodoebler/test-time-adaptation,
``classification/cfgs/cifar10_c/eata.yaml``).

``m`` lives in ``memory[:K]`` (NaN until first written), so K ≤ len(memory).

Search space (ranges ours, around published settings): e_margin in [0.2, 0.6] (EATA and SAR
use 0.4); d_margin in [0.05, 0.5] (log; EATA's ImageNet 0.05, Döbler et al.'s CIFAR-100-C
0.1 and CIFAR-10-C 0.4); fisher_alpha in [1, 2000] (log; Döbler et al.'s CIFAR 1 to EATA's
ImageNet 2000).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

SEARCH_SPACE = {
    "e_margin": {"low": 0.2, "high": 0.6},
    "d_margin": {"low": 0.05, "high": 0.5, "log": True},
    "fisher_alpha": {"low": 1.0, "high": 2000.0, "log": True},
}


def tta_loss(logits: Tensor, *, memory: Tensor, params: Tensor, source_params: Tensor,
             fisher: Tensor, e_margin: float = 0.4, d_margin: float = 0.4,
             fisher_alpha: float = 1.0) -> Tensor:
    """``1[n_sel > 0] · (Σ_sel exp(E₀ − H_i) H_i / n_sel + fisher_alpha · Σ F (θ − θ₀)²)``,
    ``E₀ = e_margin · ln K``; selection ``H_i < E₀`` and, when ``memory[:K]`` holds ``m``,
    ``|cos(m, p_i)| < d_margin``. Updates ``memory[:K]`` in place (see the module
    docstring). Defaults: ``e_margin = 0.4``, ``d_margin = 0.4``, ``fisher_alpha = 1.0``."""
    k = logits.shape[-1]
    e0 = e_margin * math.log(k)
    logp = logits.log_softmax(dim=-1)
    p = logp.exp()
    entropy = -(p * logp).sum(dim=-1)
    m = memory[:k]
    has_m = ~torch.isnan(m).any()
    # The filters are no-grad decisions; float/bool masks keep shapes fixed under vmap.
    cos = F.cosine_similarity(torch.nan_to_num(m).to(p.dtype).unsqueeze(0), p.detach(), dim=-1)
    reliable = entropy.detach() < e0
    diverse = torch.where(has_m, cos.abs() < d_margin, torch.ones_like(reliable))
    selected = (reliable & diverse).to(logits.dtype)
    n = selected.sum()
    weight = torch.exp(e0 - entropy.detach())
    entropy_term = (selected * weight * entropy).sum() / n.clamp_min(1)
    fisher_term = fisher_alpha * (fisher * (params - source_params) ** 2).sum()
    with torch.no_grad():
        mean_p = (selected.unsqueeze(-1) * p).sum(dim=0) / n.clamp_min(1)
        updated = torch.where(has_m, 0.9 * m + 0.1 * mean_p, mean_p)
        memory[:k].copy_(torch.where(n > 0, updated, m))
    return (n > 0).to(logits.dtype) * (entropy_term + fisher_term)
