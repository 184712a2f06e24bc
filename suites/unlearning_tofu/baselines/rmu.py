"""RMU (representation misdirection for unlearning), as open-unlearning runs it on TOFU.

``L = γ·A(h_θ(x_f), c·u) + α·A(h_θ(x_r), h_ref(x_r))``, with ``h`` the hidden states
``[B, T, D]`` output by one block, ``u`` a fixed random unit vector (``u ~ U[0,1)^D``,
``u/‖u‖``, given as ``control_vector``), c the steering coefficient and

``A(h, h') = (1/B) Σ_b [Σ_t m_bt · ‖h_bt − h'_bt‖²/D] / Σ_t m_bt``

the per-token mean squared error (mean over the D features), averaged over each
sequence's counted positions, then over the B sequences (a per-sequence mean, not a
token-weighted one). h_ref is the frozen reference model's (the target before unlearning).

Positions: the reference counts the hidden state at position t where the UNSHIFTED
Hugging Face label of input token t is not -100, i.e. where the input token itself is an
answer (or end) token. Our ``mask[t]`` marks the position whose NEXT token is an answer
token, so the counted positions are ``m[t] = mask[t−1]`` (``m[0] = 0``): the mask shifted
right by one, since ``hidden_*[:, t]`` is the hidden state of input position t, whose
logits are ``logits[:, t]`` (the suite feeds the whole padded sequence: T inputs, T labels),
so the count is exact. A sequence with no counted position adds 0 (the reference divides
0 by 0).

Layer: open-unlearning hooks ``model.layers.7``; the suite's model has 2 blocks, and
``MODEL["hidden_layer"] = 1`` (0-based) asks for the output of the second, last block.
Defaults c = 2, α = 1, γ = 1, all parameters trainable (``configs/trainer/RMU.yaml``,
``retain_loss_type: EMBED_DIFF``; the WMDP original trains only layers 5–7's
``mlp.down_proj``, with a larger c).
Sources: Li et al., "The WMDP benchmark: Measuring and reducing malicious use with
unlearning" (ICML 2024); reference: locuslab/open-unlearning ``src/trainer/unlearn/rmu.py``
(``compute_activation_loss``, ``get_control_vector``), ``configs/trainer/RMU.yaml``.

Search space: steering_coeff in [0.5, 20] (log; range ours around open-unlearning's 2, which
RMU.yaml says to tune per model; Li et al.'s WMDP runs use larger c, e.g. 6.5 on Zephyr-7B);
alpha in [0.1, 10] (log; ours). gamma is not tuned: under the suites' AdamW only alpha/gamma
matters, and alpha spans it.
"""

import torch

MODEL = {"hidden_layer": 1}


SEARCH_SPACE = {
    "steering_coeff": {"low": 0.5, "high": 20.0, "log": True},
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _activation_loss(hidden, target, mask):
    """``A(h, h')`` over the positions whose input token is counted by ``mask`` (shifted)."""
    counted = torch.cat([torch.zeros_like(mask[:, :1]), mask[:, :-1]], dim=1)
    per_token = (hidden - target).pow(2).mean(dim=-1)  # [B, T]
    per_sequence = (per_token * counted).sum(dim=-1) / counted.sum(dim=-1).clamp(min=1)
    return per_sequence.mean()


def unlearning_loss(forget, retain, *, hidden_forget, hidden_retain, ref_hidden_retain,
                    control_vector, steering_coeff: float = 2.0, gamma: float = 1.0,
                    alpha: float = 1.0):
    """``gamma·A(h_f, steering_coeff·u) + alpha·A(h_r, h_r^ref)`` on answer positions."""
    steer = (steering_coeff * control_vector).to(hidden_forget.dtype)
    forget_loss = _activation_loss(hidden_forget, steer.expand_as(hidden_forget),
                                   forget.mask.to(hidden_forget.dtype))
    retain_loss = _activation_loss(hidden_retain, ref_hidden_retain.detach(),
                                   retain.mask.to(hidden_retain.dtype))
    return gamma * forget_loss + alpha * retain_loss
