"""IdkDPO: DPO with the "I don't know" answer preferred over the forget answer.

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(2/β)·(1/B) Σ_i log σ(β·[(log π_θ − log π_ref)(y_idk,i|x_i)
− (log π_θ − log π_ref)(y_f,i|x_i)])``, with sequence log-likelihoods summed over the
answer tokens (``compute_batch_nll``), π_ref the frozen reference model (the target before
unlearning), row i of the idk batch being the forget batch's question i with an
"I don't know"-style answer, and ``NLL(D_r)`` the Hugging Face causal-LM loss on the
retain batch. Defaults β = 0.1, γ = 1, α = 1 (``configs/trainer/DPO.yaml``, used by
``configs/experiment/unlearn/tofu/idk.yaml`` with ``TOFU_QA_forget_idk``).
Sources: Rafailov et al., "Direct preference optimization" (NeurIPS 2023); Maini et al.,
TOFU (COLM 2024); Zhang et al., NPO (COLM 2024) for the IdK-preferred variant; reference:
locuslab/open-unlearning ``src/trainer/unlearn/dpo.py`` (``win_inputs`` = alternate,
``lose_inputs`` = original) and ``src/trainer/utils.py`` (``compute_dpo_loss``).

Search space: beta in [0.05, 0.5] (log; range ours around DPO's and open-unlearning's 0.1);
alpha in [0.1, 10] (log; ours, as grad_diff's). gamma is not tuned: under the suites' AdamW
only alpha/gamma matters, and alpha spans it.
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


def unlearning_loss(forget, retain, *, idk, ref_idk, ref_forget, beta: float = 0.1,
                    gamma: float = 1.0, alpha: float = 1.0):
    """``gamma·(−2/beta)·mean_i log σ(beta·(win_i − lose_i)) + alpha·NLL(retain)``, with
    ``win = log π_θ(y_idk|x) − log π_ref(y_idk|x)`` and ``lose`` the same on the forget
    answer."""
    win = idk.seq_logprobs - ref_idk.seq_logprobs.detach()
    lose = forget.seq_logprobs - ref_forget.seq_logprobs.detach()
    forget_loss = -2.0 / beta * torch.nn.functional.logsigmoid(beta * (win - lose)).mean()
    return gamma * forget_loss + alpha * _nll(retain)
