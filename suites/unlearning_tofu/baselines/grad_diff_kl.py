"""Gradient difference with a KL retain term (GradDiff, ``retain_loss_type: KL``).

``L = −γ·NLL(D_f) + α·KL``, ``KL = (1/(B·T)) Σ_{b,t} Σ_v π_ref(v|b,t) [log π_ref(v|b,t) −
log π_θ(v|b,t)]``, i.e. ``KL(π_ref ‖ π_θ)`` of the next-token distributions on the retain
batch, averaged over ALL B·T positions: question, answer and padding positions alike.
That is what open-unlearning computes: ``F.kl_div(log π_θ, log π_ref, log_target=True,
reduction="batchmean")`` on the logits flattened to ``[B·T, V]`` without any mask, and
``batchmean`` divides by that first dimension, B·T (not by the number of answer tokens).
We keep it, so the term is diluted by the batch's padding exactly as in the reference
(the reference flattens the logits of every input position; so do we: the suite's T
positions are all the inputs of the padded batch, the last one with a padding label).
π_ref is the frozen reference model (the target before unlearning) on the same retain
batch. Defaults γ = 1, α = 1.
Sources: Maini et al., TOFU (COLM 2024), "KL" baseline; reference: locuslab/open-unlearning
``src/trainer/unlearn/grad_diff.py`` (``compute_retain_loss``) and ``src/trainer/utils.py``
(``compute_kl_divergence``).

Search space: alpha in [0.1, 10] (log; range ours, as grad_diff's: open-unlearning's
community sweeps of the retain weight span {0.1, ..., 10}). gamma is not tuned: under the
suites' AdamW only alpha/gamma matters, and alpha spans it.
"""


SEARCH_SPACE = {
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, ref_retain, gamma: float = 1.0, alpha: float = 1.0):
    """``−gamma·NLL(forget) + alpha·mean_{b,t} KL(π_ref ‖ π_θ)`` over every retain position."""
    log_p = retain.logits.log_softmax(dim=-1)
    log_ref = ref_retain.logits.detach().log_softmax(dim=-1)
    kl = (log_ref.exp() * (log_ref - log_p)).sum(dim=-1)  # [B, T]
    return -gamma * _nll(forget) + alpha * kl.mean()
