"""SimNPO: reference-free, length-normalised NPO.

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(2/β)·(1/B) Σ_i log σ(β·(ℓ_θ(y_i|x_i)/|y_i| − δ))``,
with ``ℓ_θ(y|x) = −log π_θ(y|x)`` summed over the answer tokens (``compute_batch_nll``),
``|y|`` the number of counted answer tokens (``labels != -100``), and ``NLL(D_r)`` the
Hugging Face causal-LM loss on the retain batch. No reference model. The paper's margin
γ_paper is ``β·δ`` here. Defaults β = 4.5, δ = 0, γ = 0.125, α = 1
(``configs/trainer/SimNPO.yaml``: γ is the TOFU ``npo_coeff`` of the SimNPO code).
A sequence with no counted token (|y| = 0, all padding) is divided by 1 instead of 0, so
it adds the constant ``−(2/β) log σ(−βδ)`` with no gradient where the reference would
give NaN.
Sources: Fan et al., "Simplicity prevails: Rethinking negative preference optimization
for LLM unlearning" (arXiv 2410.07163); reference: locuslab/open-unlearning
``src/trainer/unlearn/simnpo.py``, ``src/trainer/utils.py`` (``compute_batch_nll``).

Search space: beta in [0.5, 5] (log), the reference's values (2.5 and 4.5 on TOFU, 0.7 and
0.75 on MUSE: OPTML-Group/Unlearn-Simple READMEs); delta in [0, 1] (ours; the reference uses
0); gamma in [0.1, 10] (log), the forget weight against a retain weight of 1 in the
reference (npo_coeff 0.125 to 0.1375 on TOFU; 1 against a retain coefficient 0.1, i.e. 10,
on MUSE). alpha is not tuned: under the suites' AdamW only gamma/alpha matters, and gamma
spans it.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 0.5, "high": 5.0, "log": True},
    "delta": {"low": 0.0, "high": 1.0},
    "gamma": {"low": 0.1, "high": 10.0, "log": True},
    "alpha": {"fixed": "the retain term's weight: under AdamW only its ratio to the forget weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, beta: float = 4.5, delta: float = 0.0,
                    gamma: float = 0.125, alpha: float = 1.0):
    """``gamma·(−2/beta)·mean_i log σ(beta·(ℓ_θ(y_i|x_i)/|y_i| − delta))
    + alpha·NLL(retain)``."""
    length = forget.mask.sum(dim=-1).clamp(min=1)
    per_token_nll = -forget.seq_logprobs / length - delta
    forget_loss = -2.0 / beta * torch.nn.functional.logsigmoid(beta * per_token_nll).mean()
    return gamma * forget_loss + alpha * _nll(retain)
