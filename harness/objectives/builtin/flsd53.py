"""FLSD-53: focal loss with a sample-dependent gamma, Mukhoti et al. 2020.

Search space: gamma_high in [2, 3], Mukhoti et al.'s FLSD-52 and FLSD-53 (train_scripts:
--gamma 2.0 or 3.0; here gamma_high also covers [0.2, 0.5), where the reference keeps 3).
gamma_low = 5 and threshold = 0.2 are not tuned: the pair comes from the paper's Lambert-W
bound (get_gamma(0.2) = 4.85, rounded to 5), fixed in the reference.
"""

import torch

SEARCH_SPACE = {
    "gamma_high": {"low": 2.0, "high": 3.0},
    "gamma_low": {"fixed": "the paper's Lambert-W pair with threshold (gamma 5 below p = 0.2), "
                           "not a free knob"},
    "threshold": {"fixed": "the paper's Lambert-W pair with gamma_low (p = 0.2 for gamma 5), not "
                           "a free knob"},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, gamma_low: float = 5.0,
    gamma_high: float = 3.0, threshold: float = 0.2
) -> torch.Tensor:
    """``-(1 - p_y)^gamma(p_y) * log p_y`` with ``gamma = gamma_low`` (5) where
    ``p_y < threshold`` (0.2), else ``gamma_high`` (3); the factor is not detached (the
    choice of gamma is a step function, with no gradient of its own).

    The reference chooses 5 below 0.2, 3 in [0.2, 0.5) and its ``--gamma`` (3.0 for
    FLSD-53) from 0.5 up: 5 below 0.2 and 3 elsewhere. Per sample (the trainer averages;
    the reference sums). Source: torrvision/focal_calibration
    ``Losses/focal_loss_adaptive_gamma.py`` and ``train_scripts`` (``--gamma 3.0``).
    """
    log_p_y = logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    p_y = log_p_y.exp()
    gamma = torch.where(p_y.detach() < threshold, gamma_low, gamma_high)
    return -((1 - p_y) ** gamma) * log_p_y
