"""Gradient difference (GradDiff): ascend on the forget set, descend on the retain set.

``L = −γ·NLL(D_f) + α·NLL(D_r)``, each ``NLL`` the Hugging Face causal-LM loss (mean
``−log π_θ`` over the batch's counted answer tokens, token-weighted across sequences).
Defaults γ = 1, α = 1 (``retain_loss_type: NLL``).
Sources: Liu et al., "Continual learning and private unlearning" (CoLLAs 2022); Maini et
al., TOFU (COLM 2024); reference: locuslab/open-unlearning
``src/trainer/unlearn/grad_diff.py``, ``configs/trainer/GradDiff.yaml``.

Search space: alpha in [0.1, 10] (log; range ours, spanning the retain weights of
open-unlearning's community sweeps: {0.1, 1, 10} for WGA, {1, 2, 5} for UNDIAL; TOFU uses
1). gamma is not tuned: the suites train with AdamW, whose steps (nearly) ignore the loss's
scale, so only alpha/gamma matters and alpha spans it.
"""


SEARCH_SPACE = {
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, gamma: float = 1.0, alpha: float = 1.0):
    """``−gamma·NLL(forget) + alpha·NLL(retain)``."""
    return -gamma * _nll(forget) + alpha * _nll(retain)
