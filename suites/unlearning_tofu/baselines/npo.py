"""Negative preference optimisation (NPO), the forget term alone (the NPO paper's "NPO").

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(2/β)·(1/B) Σ_i log σ(−β·[log π_θ(y_i|x_i) −
log π_ref(y_i|x_i)])``, with ``log π(y|x) = −ℓ(y|x)`` the answer's summed log-likelihood
(``compute_batch_nll``: summed over the answer tokens, so sequence-level, then a plain
mean over the B sequences) and π_ref the frozen reference model (the target before
unlearning). Defaults β = 0.1, γ = 1 and **α = 0**: the NPO paper's "NPO" has no retain
term. open-unlearning's ``NPO`` trainer (``configs/trainer/NPO.yaml``) already adds the
retain NLL with α = 1, i.e. the paper's "NPO-RT", which is ``npo_rt.py``.
Sources: Zhang, Lin, Bai & Mei, "Negative preference optimization: From catastrophic
collapse to effective unlearning" (COLM 2024); reference: locuslab/open-unlearning
``src/trainer/unlearn/npo.py``, ``src/trainer/utils.py`` (``compute_dpo_loss`` with
``win_inputs=None``, ``compute_batch_nll``).

Search space: beta in [0.05, 0.5] (log; range ours around Zhang et al.'s 0.1, which their
code and open-unlearning fix). Not tuned: alpha, whose 0 defines this method (alpha > 0 is
npo_rt), and gamma, the scale of the only term, which the suites' AdamW (nearly) ignores.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 0.05, "high": 0.5, "log": True},
    "gamma": {"fixed": "the loss's overall scale, which AdamW's steps (nearly) ignore"},
    "alpha": {"fixed": "0 is what defines this objective (no retain term)"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, ref_forget, beta: float = 0.1, gamma: float = 1.0,
                    alpha: float = 0.0):
    """``gamma·(−2/beta)·mean_i log σ(−beta·(log π_θ − log π_ref)(y_i|x_i))
    + alpha·NLL(retain)``; with the default alpha = 0 the retain term adds exactly 0."""
    log_ratio = forget.seq_logprobs - ref_forget.seq_logprobs.detach()
    forget_loss = -2.0 / beta * torch.nn.functional.logsigmoid(-beta * log_ratio).mean()
    return gamma * forget_loss + alpha * _nll(retain)
