"""TENT: test-time entropy minimisation.

``L = (1/B) Σ_i H(softmax(z_i))``, ``H(p) = −Σ_k p_k log p_k``, minimised over the BN
affine parameters with test-batch statistics, one step per batch. Wang et al., "Tent:
Fully test-time adaptation by entropy minimization" (ICLR 2021); reference:
github.com/DequanWang/tent, ``tent.py`` (``softmax_entropy``, then ``.mean(0)``).
"""

from torch import Tensor


def tta_loss(logits: Tensor) -> Tensor:
    """Per-sample entropy ``H(softmax(z_i)) = −Σ_k p_ik log p_ik`` ``[B]`` (the suite takes
    the mean), computed with ``log_softmax`` as the reference does. No hyperparameters."""
    logp = logits.log_softmax(dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)
