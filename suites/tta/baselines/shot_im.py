"""SHOT-IM: information maximisation (SHOT without its pseudo-label term).

``L = (1/B) Σ_i H(p_i) − H(p̄)``, ``p̄ = (1/B) Σ_i p_i``, ``p = softmax(z)``: confident
individual predictions (low conditional entropy) that are diverse over the batch (high
entropy of the mean). Liang et al., "Do we really need to access the source data? Source
hypothesis transfer for unsupervised domain adaptation" (ICML 2020); the test-time form
follows github.com/fiveai/LAME ``src/adaptation/shot.py`` (β = 0: no pseudo-label loss;
``log(p + 1e-10)`` in both entropies).
"""

from torch import Tensor

EPS = 1e-10  # inside the logs, as in the LAME repo's shot.py


def tta_loss(logits: Tensor) -> Tensor:
    """Scalar ``mean_i H(p_i) − H(mean_i p_i)`` with ``H(p) = −Σ_k p_k log(p_k + 1e-10)``,
    ``p = softmax(logits)``. No hyperparameters."""
    p = logits.softmax(dim=-1)
    conditional = -(p * (p + EPS).log()).sum(dim=-1).mean()
    mean = p.mean(dim=0)
    diversity = -(mean * (mean + EPS).log()).sum()
    return conditional - diversity
