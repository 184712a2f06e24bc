"""Source: no adaptation (the lower bound of every TTA table).

The frozen source model in eval mode — BatchNorm uses the source's running statistics
(``MODEL = {"normalization": "source"}``) — and its softmax taken as it is:
``p_i = softmax(f_θ₀(x_i))``. The "Source" row of TENT (Wang et al., ICLR 2021,
github.com/DequanWang/tent) and of the other baselines' papers.
"""

from torch import Tensor

MODEL = {"normalization": "source"}


def tta_adjust(probs: Tensor, features: Tensor) -> Tensor:
    """Identity: returns ``probs`` ``[B, K]`` unchanged (``features`` unused). No
    hyperparameters."""
    return probs
