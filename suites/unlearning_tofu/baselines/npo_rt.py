"""NPO with a retain NLL term (the NPO paper's "NPO-RT"; open-unlearning's ``NPO``).

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(2/β)·(1/B) Σ_i log σ(−β·[log π_θ(y_i|x_i) −
log π_ref(y_i|x_i)])`` with sequence-level log-likelihoods summed over the answer tokens
(``compute_batch_nll``), π_ref the frozen reference model, and ``NLL(D_r)`` the Hugging
Face causal-LM loss on the retain batch (token-weighted mean). Defaults β = 0.1, γ = 1,
α = 1, as ``configs/trainer/NPO.yaml`` (``retain_loss_type: NLL``).
Sources: Zhang, Lin, Bai & Mei, "Negative preference optimization" (COLM 2024);
reference: locuslab/open-unlearning ``src/trainer/unlearn/npo.py``,
``src/trainer/utils.py`` (``compute_dpo_loss``, ``compute_batch_nll``).

Search space: beta in [0.05, 0.5] (log; range ours around Zhang et al.'s 0.1); alpha in
[0.1, 10] (log; ours, as grad_diff's). gamma is not tuned: under the suites' AdamW only
alpha/gamma matters, and alpha spans it.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 0.05, "high": 0.5, "log": True},
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, ref_forget, beta: float = 0.1, gamma: float = 1.0,
                    alpha: float = 1.0):
    """``gamma·(−2/beta)·mean_i log σ(−beta·(log π_θ − log π_ref)(y_i|x_i))
    + alpha·NLL(retain)``."""
    log_ratio = forget.seq_logprobs - ref_forget.seq_logprobs.detach()
    forget_loss = -2.0 / beta * torch.nn.functional.logsigmoid(-beta * log_ratio).mean()
    return gamma * forget_loss + alpha * _nll(retain)
