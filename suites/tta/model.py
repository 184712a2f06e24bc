"""The suite's source models, written as functions of their parameters.

A model is a list of layers (:data:`ARCHITECTURES`); its parameters are a flat dict of
tensors, so that ``torch.func.vmap`` runs every seed's model at once. BatchNorm runs in
one of two modes: ``batch`` normalizes with the statistics of the test batch itself (TENT
and BN adaptation, as ``track_running_stats=False`` in train mode), ``source`` with the
running statistics the source model kept (eval mode: no adaptation, LAME). Only the
BatchNorm weights and biases (:func:`affine_names`) are ever adapted.

The features an objective may use are the penultimate activations, after the last ReLU
(the input of the linear head).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

EPS = 1e-5  # BatchNorm's, as torch.nn.BatchNorm*
MOMENTUM = 0.1  # of the running statistics while the source model trains

# (kind, *sizes): linear (in, out), conv (in, out, stride), bn (channels), relu, pool.
ARCHITECTURES: dict[str, tuple[tuple, ...]] = {
    # digits 8×8 flattened: the BN-MLP of the prototype protocol.
    "bn-mlp": (("linear", 64, 128), ("bn", 128), ("relu",), ("linear", 128, 128),
               ("bn", 128), ("relu",), ("linear", 128, 10)),
    # CIFAR-10 32×32×3: a small all-convolutional BN network (opt-in real data).
    "bn-cnn": (("conv", 3, 32, 1), ("bn", 32), ("relu",), ("conv", 32, 64, 2), ("bn", 64),
               ("relu",), ("conv", 64, 64, 1), ("bn", 64), ("relu",), ("conv", 64, 128, 2),
               ("bn", 128), ("relu",), ("conv", 128, 128, 1), ("bn", 128), ("relu",),
               ("pool",), ("linear", 128, 10)),
}


def init(architecture: str, seed: int) -> dict[str, Tensor]:
    """Fresh parameters and running statistics (PyTorch's default initializations)."""
    gen = torch.Generator().manual_seed(seed)
    params: dict[str, Tensor] = {}
    for i, (kind, *sizes) in enumerate(ARCHITECTURES[architecture]):
        if kind in ("linear", "conv"):
            fan_in = sizes[0] * (9 if kind == "conv" else 1)
            shape = (sizes[1], sizes[0], 3, 3) if kind == "conv" else (sizes[1], sizes[0])
            bound = fan_in ** -0.5  # kaiming_uniform(a=√5) and the bias rule of nn.Linear
            params[f"{i}.weight"] = (torch.rand(shape, generator=gen) * 2 - 1) * bound
            params[f"{i}.bias"] = (torch.rand(sizes[1], generator=gen) * 2 - 1) * bound
        elif kind == "bn":
            params[f"{i}.weight"] = torch.ones(sizes[0])
            params[f"{i}.bias"] = torch.zeros(sizes[0])
            params[f"{i}.running_mean"] = torch.zeros(sizes[0])
            params[f"{i}.running_var"] = torch.ones(sizes[0])
    return params


def affine_names(architecture: str) -> list[str]:
    """The adapted parameters: every BatchNorm weight and bias, in layer order."""
    return [f"{i}.{w}" for i, (kind, *_) in enumerate(ARCHITECTURES[architecture])
            if kind == "bn" for w in ("weight", "bias")]


def forward(architecture: str, params: Mapping[str, Tensor], x: Tensor, *,
            normalization: str = "batch",
            running: dict[str, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """``(logits [B, K], features [B, D])`` of one model on ``x``. With ``running`` (source
    training only) batch statistics are used and the running ones updated into it."""
    layers = ARCHITECTURES[architecture]
    h = x
    features = x
    for i, (kind, *sizes) in enumerate(layers):
        if kind == "linear":
            if i == len(layers) - 1:
                features = h
            h = h @ params[f"{i}.weight"].T + params[f"{i}.bias"]
        elif kind == "conv":
            h = F.conv2d(h, params[f"{i}.weight"], params[f"{i}.bias"], stride=sizes[2],
                         padding=1)
        elif kind == "bn":
            h = _batch_norm(h, params, i, normalization, running)
        elif kind == "relu":
            h = torch.relu(h)
        elif kind == "pool":
            h = h.mean(dim=(-2, -1))
    return h, features


def _batch_norm(h: Tensor, params: Mapping[str, Tensor], i: int, normalization: str,
                running: dict[str, Tensor] | None) -> Tensor:
    dims = (0,) if h.dim() == 2 else (0, 2, 3)
    shape = (1, -1) if h.dim() == 2 else (1, -1, 1, 1)
    if normalization == "source" and running is None:
        mean, var = params[f"{i}.running_mean"], params[f"{i}.running_var"]
    else:
        mean, var = h.mean(dim=dims), h.var(dim=dims, unbiased=False)
        if running is not None:
            with torch.no_grad():
                n = h.numel() // h.shape[1]
                unbiased = var * n / max(n - 1, 1)
                for name, value in ((f"{i}.running_mean", mean), (f"{i}.running_var", unbiased)):
                    running[name].mul_(1 - MOMENTUM).add_(value.detach(), alpha=MOMENTUM)
    scale = params[f"{i}.weight"] * torch.rsqrt(var + EPS)
    return (h - mean.reshape(shape)) * scale.reshape(shape) + params[f"{i}.bias"].reshape(shape)


def flat(params: Mapping[str, Tensor], names: list[str]) -> Tensor:
    """The named (vector) parameters as one vector; stacked members give ``[M, P]``."""
    return torch.cat([params[n] for n in names], dim=-1)
