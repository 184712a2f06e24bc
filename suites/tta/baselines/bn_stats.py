"""BN-1 / test-batch normalization statistics, without any gradient step.

BatchNorm normalises each test batch with its own mean and variance (the suite's default
``"normalization": "batch"``), the affine parameters stay at the source's values, and the
softmax is taken as it is: ``p_i = softmax(f_θ₀(x_i; μ_B, σ²_B))``. Schneider et al.,
"Improving robustness against common corruptions by covariate shift adaptation"
(NeurIPS 2020), with N = 0 source samples mixed in (BN-1); TENT's "norm" baseline
(Wang et al., ICLR 2021, github.com/DequanWang/tent, ``norm.py``).
"""

from torch import Tensor


def tta_adjust(probs: Tensor, features: Tensor) -> Tensor:
    """Identity: returns ``probs`` ``[B, K]`` (already computed with test-batch BN
    statistics) unchanged; ``features`` unused. No hyperparameters."""
    return probs
