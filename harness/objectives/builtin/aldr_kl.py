"""ALDR-KL loss (LDR-KL with adaptive per-sample lambda), Zhu et al. ICML 2023.

Stateful: each training sample's lambda lives in the trainer's per-seed memory; the hook
gets its batch's slice as ``state`` and updates it in place.

Search space: lambda0 in [0.1, 10] (log), the reference's grid {0.1, 1, 10} for Lambda
(experiment.py, commented out beside the chosen 10); alpha in [1.1, 10] (log; ours around
the reference's 2: alpha > 1 keeps lambda >= lambda0 (1 - 1/alpha) > 0); margin in [0, 0.5]
(ours around the fixed 0.1). softplus is a switch of the input transform, not tuned.
"""

import math

import torch
import torch.nn.functional as F

SEARCH_SPACE = {
    "alpha": {"low": 1.1, "high": 10.0, "log": True},
    "lambda0": {"low": 0.1, "high": 10.0, "log": True},
    "margin": {"low": 0.0, "high": 0.5},
}


def classification_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    alpha: float = 2.0,
    lambda0: float = 10.0,
    margin: float = 0.1,
    softplus: bool = False,
    state: torch.Tensor,
) -> torch.Tensor:
    """ALDR-KL, per sample i with stored ``lambda_i`` (NaN in ``state`` means ``lambda0``):

    ``f = z / (||z||_1 / K)`` (``softplus(z)`` first if ``softplus``; the reference does so
    only for CIFAR-100; a zero ``z`` is divided by 1 instead of 0);
    ``pi = normalize(softmax(f / lambda_old) + 1e-5)``;
    ``lambda = lambda0 - lambda0 * KL(pi || U) / (alpha log K)`` (no grad; written to
    ``state``, so it stays in ``[lambda0 (1 - 1/alpha), lambda0]``);
    ``L = lambda log((1/K) sum_k exp((f_k - f_y + margin 1[k != y]) / lambda))
    - (alpha log K / (2 lambda0)) (lambda - lambda0)^2``.
    Source: Optimization-AI/ICML2023_LDR ``loss.py`` ``ALDRLoss_V1``.
    """
    k = logits.shape[-1]
    z = F.softplus(logits) if softplus else logits
    scale = z.abs().sum(-1, keepdim=True) / k
    f = z / torch.where(scale > 0, scale, torch.ones_like(scale))
    log_k = math.log(k)
    with torch.no_grad():
        lam_old = torch.nan_to_num(state.to(f.dtype), nan=lambda0)
        pi = (f / lam_old[:, None]).softmax(-1) + 1e-5
        pi = pi / pi.sum(-1, keepdim=True)
        kl = (pi * (k * pi).log()).sum(-1)
        lam = lambda0 - lambda0 * kl / (alpha * log_k)
        state.copy_(lam.to(state.dtype))
    y = targets[:, None]
    not_y = (torch.arange(k, device=logits.device) != y).to(f.dtype)
    d = (f - f.gather(-1, y) + margin * not_y) / lam[:, None]
    loss = lam * (torch.logsumexp(d, -1) - log_k)
    return loss - alpha * log_k / (2 * lambda0) * (lam - lambda0) ** 2
