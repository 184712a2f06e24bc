"""Cross-entropy plus weighted MMCE, Kumar, Sarawagi & Jain 2018, as Mukhoti et al. 2020 ran it.

Search space (log; ours, neither paper gives a grid): lam in [0.5, 8] around Mukhoti et
al.'s 2; width in [0.2, 0.8] around Kumar et al.'s fixed Laplacian kernel width 0.4.
"""

import torch

SEARCH_SPACE = {
    "lam": {"low": 0.5, "high": 8.0, "log": True},
    "width": {"low": 0.2, "high": 0.8, "log": True},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, lam: float = 2.0, width: float = 0.4
) -> torch.Tensor:
    """``mean CE + lam * MMCE_w`` over the batch (a scalar: MMCE compares samples).

    With ``r_i`` the top-class confidence, C the correctly and I the wrongly predicted
    samples (m and n of them) and the Laplacian kernel ``k(a, b) = exp(-|a - b| / width)``:

        MMCE_w^2 = S_CC / (m^2 + 1e-5) + S_II / (n^2 + 1e-5) - 2 S_CI / (m n + 1e-5)
        S_CC = mean_{i,j in C} (1 - r_i)(1 - r_j) k(r_i, r_j)
        S_II = mean_{i,j in I} r_i r_j k(r_i, r_j)
        S_CI = mean_{i in C, j in I} (1 - r_i) r_j k(r_i, r_j)

    and ``MMCE_w = sqrt(max(MMCE_w^2, 0) + 1e-10)``, 0 when C or I is empty (the clamp at
    0 is ours: the reference's square root of a negative estimate would be NaN). The pair
    means and the extra 1/m^2, 1/n^2, 1/(mn) are the reference code's (so each term is
    divided by the square of its pair count): kept as is, since the published numbers
    come from it.
    lam=2 and width=0.4 are Mukhoti et al.'s. Source: torrvision/focal_calibration
    ``Losses/mmce.py`` (``MMCE_weighted``) and ``Losses/loss.py`` (``mmce_weighted``).
    """
    ce = torch.nn.functional.cross_entropy(logits, targets)
    p = logits.softmax(-1)
    r, predicted = p.max(-1)
    c = (predicted == targets).to(r.dtype)
    w = 1 - c
    m, n = c.sum(), w.sum()
    kernel = torch.exp(-(r[:, None] - r[None, :]).abs() / width)
    right, wrong = c * (1 - r), w * r  # zero outside their set
    s_cc = (right[:, None] * right[None, :] * kernel).sum() / (m * m).clamp_min(1)
    s_ii = (wrong[:, None] * wrong[None, :] * kernel).sum() / (n * n).clamp_min(1)
    s_ci = (right[:, None] * wrong[None, :] * kernel).sum() / (m * n).clamp_min(1)
    squared = s_cc / (m * m + 1e-5) + s_ii / (n * n + 1e-5) - 2 * s_ci / (m * n + 1e-5)
    both = m * n > 0  # both sets non-empty
    mmce = torch.where(both, (squared.clamp_min(0) + 1e-10).sqrt(), torch.zeros_like(squared))
    return ce + lam * mmce
