"""UNDIAL: self-distillation towards the reference model with the answer token pushed down.

``L = γ·L_f + α·NLL(D_r)``, ``L_f = (1/(B·T)) Σ_{b,t} CE(softmax(z_θ,bt), q_bt)``, the
cross-entropy ``−Σ_v q_bt(v) log softmax(z_θ,bt)(v)`` to the soft target
``q_bt = softmax(z_ref,bt − β·e_{y_bt})`` where the position's next token y_bt is an
answer (or end) token, and ``q_bt = softmax(z_ref,bt)`` elsewhere; z_ref are the frozen
reference model's logits (the target before unlearning). ``NLL(D_r)`` is the Hugging Face
causal-LM loss on the retain batch. Defaults β = 10, γ = 1, α = 0
(``configs/trainer/UNDIAL.yaml``: the retain term is off).

Positions: the reference averages the cross-entropy over ALL B·T shifted positions
(``CrossEntropyLoss(reduction="none")`` with soft targets has no ``ignore_index``, then
``.mean()``), so the question and padding positions are distilled towards the plain
reference too. It subtracts β at the index ``shift_labels``, which is -100 at question and
padding positions: negative indexing then hits vocabulary entry V − 100, an accident of
the code (it pushes down an arbitrary token, a reserved one in Llama-3's vocabulary). We
keep the mean over all B·T positions but subtract β only where ``mask`` is 1 (exactly
where the Hugging Face label is not -100), so question and padding positions get the
unmodified reference distribution; our padding labels (0) and question labels are never
pushed down.
Sources: Dong et al., "UNDIAL: Self-distillation with adjusted logits for robust
unlearning in large language models" (NAACL 2025); reference: locuslab/open-unlearning
``src/trainer/unlearn/undial.py`` and ``src/trainer/utils.py`` (``compute_undial_loss``).

Search space: beta in [3, 30] (log), open-unlearning's UNDIAL notes ('typically [3, 10,
30]', community/methods/UNDIAL). Not tuned: alpha, 0 in the paper (no retain term), and
gamma, the scale of the only term, which the suites' AdamW (nearly) ignores.
"""

import torch

SEARCH_SPACE = {
    "beta": {"low": 3.0, "high": 30.0, "log": True},
    "gamma": {"fixed": "the loss's overall scale, which AdamW's steps (nearly) ignore"},
    "alpha": {"fixed": "0 is what defines this objective (no retain term)"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, ref_forget, beta: float = 10.0, gamma: float = 1.0,
                    alpha: float = 0.0):
    """``gamma·mean_{b,t} CE(z_θ, softmax(z_ref − beta·mask·e_y)) + alpha·NLL(retain)``."""
    vocab = torch.arange(forget.logits.shape[-1], device=forget.labels.device)
    answer = (forget.labels.unsqueeze(-1) == vocab).to(forget.logits.dtype)  # one-hot [B,T,V]
    push = beta * answer * forget.mask.to(forget.logits.dtype).unsqueeze(-1)
    target = (ref_forget.logits.detach() - push).softmax(dim=-1)
    cross_entropy = -(target * forget.logits.log_softmax(dim=-1)).sum(dim=-1)  # [B, T]
    return gamma * cross_entropy.mean() + alpha * _nll(retain)
