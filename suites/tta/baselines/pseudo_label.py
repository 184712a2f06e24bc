"""Hard pseudo-labelling with a confidence threshold.

``L = Σ_{i: max_k p_ik > τ} −log p_{i, ŷ_i} / max(n_sel, 1)``, ``ŷ_i = argmax_k p_ik``,
``p = softmax(z)`` (the mean cross-entropy of the confident samples against their own
argmax; zero gradient, so no step, when none is confident). Lee, "Pseudo-label: the simple
and efficient semi-supervised learning method for deep neural networks" (ICML 2013
workshop); the test-time form follows github.com/fiveai/LAME
``src/adaptation/pseudo_label.py`` (``PL_THRESHOLD = 0.9``, strict ``>``).

Search space: threshold in [0.7, 0.99] (range ours around the LAME repo's fixed 0.9).
"""

from torch import Tensor

SEARCH_SPACE = {
    "threshold": {"low": 0.7, "high": 0.99},
}


def tta_loss(logits: Tensor, *, threshold: float = 0.9) -> Tensor:
    """``Σ_i 1[max p_i > threshold] · (−log p_{i, argmax p_i}) / max(n_sel, 1)``; the mask and
    the pseudo-labels are detached. Default ``threshold = 0.9`` (the LAME repo's
    ``PL_THRESHOLD``). ``log_softmax`` stands for the reference's ``log(p + 1e-10)``
    (the same to ~1e-10 for p > 0.9)."""
    logp = logits.log_softmax(dim=-1)
    confidence, label = logp.detach().exp().max(dim=-1)
    selected = (confidence > threshold).to(logits.dtype)  # float mask: vmap-compatible
    nll = -logp.gather(-1, label.unsqueeze(-1)).squeeze(-1)
    return (selected * nll).sum() / selected.sum().clamp_min(1)
