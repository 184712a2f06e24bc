"""Fast certified robust training, Shi et al. 2021: IBP init, BatchNorm, warm-up regularisers.

Search space: reg_lambda in [0.1, 1] (log) around the reference's 0.5 (its README recommends
0.1 to 0.2 for TinyImageNet); tol in [0.25, 0.75] (ours around the fixed 0.5).
"""

import torch
import torch.nn.functional as F

# Read by the certified suite: train this objective's network with BatchNorm after every
# hidden affine layer and the IBP initialisation W ~ N(0, (√(2π)/fan_in)²).
MODEL = {"batch_norm": True, "init": "ibp"}


SEARCH_SPACE = {
    "reg_lambda": {"low": 0.1, "high": 1.0, "log": True},
    "tol": {"low": 0.25, "high": 0.75},
}


def certified_loss(
    logits: torch.Tensor,
    worst_logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    eps: float,
    eps_max: float,
    bounds: list,
    reg_lambda: float = 0.5,
    tol: float = 0.5,
) -> torch.Tensor:
    """Natural CE while ε_t = 0, then ``mean CE(z̲, y) + λ_t·(L_tightness + L_relu)``.

    λ_t = λ·(1 − ε_t/ε_max), so the regularisers act during the ε ramp only. With
    pre-ReLU IBP bounds [l, u] of each hidden layer, centre c = (u+l)/2, radius r = (u−l)/2:
      L_tightness = mean_layers ReLU(τ − mean(r₀)/mean(r)) / τ, r₀ the input box radius;
      L_relu = mean_layers [ReLU(τ − ρ_mean) + ReLU(τ − ρ_var)] / τ, where ρ = min(q, 1/q)
      of the ratio q of the mean of c over active (l > 0) and inactive (u < 0) neurons
      (−mean for inactive), and of the sum of (c − mean c)² over the same two sets.

    Source: shizhouxing/Fast-Certified-Robust-Training ``regularization.py``
    (``compute_reg``, ``--reg-obj relu tightness``, ``--reg-lambda 0.5``, ``--tol 0.5``),
    ``manual_init.py`` (IBP init), ``train.py`` (pure robust loss once ε > 0).
    """
    if eps <= 0:
        return F.cross_entropy(logits, targets, reduction="none")
    robust = F.cross_entropy(worst_logits, targets)
    lam = reg_lambda * (1.0 - min(eps / eps_max, 1.0))
    if lam <= 0:
        return robust
    (l0, u0), hidden = bounds[0], bounds[1:-1]
    tightness_0 = ((u0 - l0) / 2).mean()
    tightness = relu = torch.zeros((), dtype=logits.dtype)
    for lower, upper in hidden:
        center, radius = (upper + lower) / 2, (upper - lower) / 2
        tightness = tightness + F.relu(tol - tightness_0 / radius.mean().clamp_min(1e-12)) / tol
        active, inactive = (lower > 0).to(center.dtype), (upper < 0).to(center.dtype)
        mean_ratio = _balanced((center * active).mean(), -(center * inactive).mean())
        delta = (center - center.mean()) ** 2
        var_ratio = _balanced((delta * active).sum(), (delta * inactive).sum())
        relu = relu + (F.relu(tol - mean_ratio) + F.relu(tol - var_ratio)) / tol
    return robust + lam * (tightness + relu) / len(hidden)


def _balanced(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """min(a/b, b/a) with the reference's clamps; 0 when either side is empty (not NaN)."""
    q = a / b.clamp_min(1e-12)
    return torch.minimum(q, 1 / q.clamp_min(1e-12))
