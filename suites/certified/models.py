"""The certified suite's networks, and how BatchNorm becomes plain affine layers.

A :class:`Net` has two faces. ``train`` is the module ``train_members`` trains: Linear
or Conv2d layers, each optionally followed by BatchNorm, and ReLUs. Its BatchNorm keeps
no running statistics (``track_running_stats=False``), so it is a pure function of the
parameters and the batch and works under ``vmap`` over stacked members. ``plain`` is
the same network without BatchNorm: bounds, attacks and the trusted evaluation only
ever see ``plain``, with BatchNorm folded into the preceding affine layer
(``W' = s·W``, ``b' = s·(b − μ) + β``, ``s = γ/√(σ² + 1e-5)``), which is exact.

During training the statistics are the clean batch's (Shi et al. 2021; they are part
of the graph, as in BatchNorm's training mode). After training, :func:`recalibrate`
re-estimates them on the training set, layer by layer ("precise BN"), and the folded
network is what gets evaluated.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BN_EPS = 1e-5
INITS = ("default", "ibp")


class IBPInitLinear(nn.Linear):
    """Linear with Shi et al.'s IBP initialisation: W ~ N(0, (√(2π)/fan_in)²), bias as PyTorch."""

    def reset_parameters(self) -> None:
        super().reset_parameters()
        with torch.no_grad():
            self.weight.normal_(0.0, math.sqrt(2 * math.pi) / self.in_features)


class IBPInitConv2d(nn.Conv2d):
    """Conv2d with the IBP initialisation (fan_in = in_channels · kernel area)."""

    def reset_parameters(self) -> None:
        super().reset_parameters()
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1] // self.groups
        with torch.no_grad():
            self.weight.normal_(0.0, math.sqrt(2 * math.pi) / fan_in)


@dataclass(frozen=True)
class Net:
    train: nn.Sequential
    plain: nn.Sequential
    # train name of each affine layer -> (plain name, train name of its BatchNorm or "")
    affine: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def batch_norm(self) -> bool:
        return any(bn for _, bn in self.affine.values())

    def forward(self, params: dict[str, Tensor], x: Tensor,
                stats: dict[str, tuple[Tensor, Tensor]] | None = None
                ) -> tuple[Tensor, dict[str, tuple[Tensor, Tensor]]]:
        """Logits of ONE member and the BatchNorm statistics used: the batch's unless given."""
        used: dict[str, tuple[Tensor, Tensor]] = {}
        h = x
        for name, layer in self.train.named_children():
            if isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
                used[name] = stats[name] if stats is not None else _batch_stats(h)
                h = _normalize(params, name, h, *used[name])
            else:
                h = _apply(layer, name, params, h)
        return h, used

    def fold(self, params: dict[str, Tensor],
             stats: dict[str, tuple[Tensor, Tensor]]) -> dict[str, Tensor]:
        """Parameters of ``plain`` for ONE member (or stacked: leading dims broadcast)."""
        out = {}
        for name, (plain_name, bn) in self.affine.items():
            w, b = params[f"{name}.weight"], params[f"{name}.bias"]
            if bn:
                mean, var = stats[bn]
                s = params[f"{bn}.weight"] / torch.sqrt(var + BN_EPS)
                w = w * s.reshape(s.shape + (1,) * (w.dim() - s.dim()))
                b = (b - mean) * s + params[f"{bn}.bias"]
            out[f"{plain_name}.weight"], out[f"{plain_name}.bias"] = w, b
        return out


def certified_mlp(sizes: tuple[int, ...], *, batch_norm: bool = False,
                  init: str = "default") -> Net:
    """``certified_mlp((64, 128, 128, 10))``: Linear[-BN]-ReLU blocks, then a Linear head."""
    blocks = [("linear", fan_in, fan_out) for fan_in, fan_out in zip(sizes[:-1], sizes[1:],
                                                                     strict=True)]
    return _build(blocks, batch_norm, init)


def certified_cnn(in_channels: int, image_size: int, num_classes: int, *,
                  batch_norm: bool = False, init: str = "default") -> Net:
    """The "small" CNN of Wong & Kolter / CROWN-IBP: conv 16 and 32 (4×4, stride 2), FC 100."""
    side = image_size // 4
    blocks = [("conv", in_channels, 16), ("conv", 16, 32), ("flatten",),
              ("linear", 32 * side * side, 100), ("linear", 100, num_classes)]
    return _build(blocks, batch_norm, init)


def _build(blocks: list[tuple], batch_norm: bool, init: str) -> Net:
    if init not in INITS:
        raise ValueError(f"unknown init {init!r} (known: {', '.join(INITS)})")
    affine_blocks = [b for b in blocks if b[0] != "flatten"]
    last = affine_blocks[-1]
    train: list[tuple[str, nn.Module]] = []
    plain: list[tuple[str, nn.Module]] = []
    affine: dict[str, tuple[str, str]] = {}

    def add(layer: nn.Module, plain_layer: nn.Module | None) -> str:
        name = str(len(train))
        train.append((name, layer))
        if plain_layer is not None:
            plain.append((str(len(plain)), plain_layer))
        return name

    for block in blocks:
        if block[0] == "flatten":
            add(nn.Flatten(), nn.Flatten())
            continue
        kind, fan_in, fan_out = block
        head = block is last
        ibp = init == "ibp" and not head  # Shi et al.: every layer but the last
        if kind == "conv":
            cls = IBPInitConv2d if ibp else nn.Conv2d
            layer = cls(fan_in, fan_out, 4, stride=2, padding=1)
            plain_layer = nn.Conv2d(fan_in, fan_out, 4, stride=2, padding=1)
            norm = nn.BatchNorm2d
        else:
            layer = (IBPInitLinear if ibp else nn.Linear)(fan_in, fan_out)
            plain_layer = nn.Linear(fan_in, fan_out)
            norm = nn.BatchNorm1d
        name = add(layer, plain_layer)
        plain_name = plain[-1][0]
        bn = ""
        if batch_norm and not head:
            bn = add(norm(fan_out, track_running_stats=False), None)
        affine[name] = (plain_name, bn)
        if not head:
            add(nn.ReLU(), nn.ReLU())
    return Net(nn.Sequential(OrderedDict(train)), nn.Sequential(OrderedDict(plain)), affine)


def _batch_stats(h: Tensor) -> tuple[Tensor, Tensor]:
    dims = (0,) if h.dim() == 2 else (0, 2, 3)
    return h.mean(dims), h.var(dims, unbiased=False)


def _normalize(params: dict[str, Tensor], name: str, h: Tensor, mean: Tensor,
               var: Tensor) -> Tensor:
    shape = (-1,) + (1,) * (h.dim() - 2)
    scale = params[f"{name}.weight"] / torch.sqrt(var + BN_EPS)
    return (h - mean.view(shape)) * scale.view(shape) + params[f"{name}.bias"].view(shape)


def _apply(layer: nn.Module, name: str, params: dict[str, Tensor], h: Tensor) -> Tensor:
    if isinstance(layer, nn.Linear):
        return F.linear(h, params[f"{name}.weight"], params[f"{name}.bias"])
    if isinstance(layer, nn.Conv2d):
        return F.conv2d(h, params[f"{name}.weight"], params[f"{name}.bias"], layer.stride,
                        layer.padding)
    if isinstance(layer, nn.ReLU):
        return h.relu()
    if isinstance(layer, nn.Flatten):
        return h.flatten(1)
    raise TypeError(f"unsupported layer {type(layer).__name__}")


@torch.no_grad()
def recalibrate(net: Net, params: dict[str, Tensor], x: Tensor,
                chunk: int = 2048) -> dict[str, tuple[Tensor, Tensor]]:
    """BatchNorm statistics of ONE member over all of ``x``, layer by layer (precise BN).

    Layer k's mean and (biased) variance are exact over ``x``, with layers before it
    normalised by their own full-data statistics, i.e. what BatchNorm's training mode
    computes on one batch holding all of ``x``, in chunks.
    """
    stats: dict[str, tuple[Tensor, Tensor]] = {}
    for name, layer in net.train.named_children():
        if not isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
            continue
        total, total_sq, count = 0.0, 0.0, 0
        for i in range(0, len(x), chunk):
            h = _prefix(net, params, x[i:i + chunk], stats, name).double()
            dims = (0,) if h.dim() == 2 else (0, 2, 3)
            total = total + h.sum(dims)
            total_sq = total_sq + (h * h).sum(dims)
            count += h.numel() // h.shape[1]
        mean = total / count
        var = (total_sq / count - mean * mean).clamp_min(0.0)
        stats[name] = (mean.float(), var.float())
    return stats


def _prefix(net: Net, params: dict[str, Tensor], x: Tensor,
            stats: dict[str, tuple[Tensor, Tensor]], stop: str) -> Tensor:
    """The input of layer ``stop`` (earlier BatchNorms use ``stats``)."""
    h = x
    for name, layer in net.train.named_children():
        if name == stop:
            return h
        if isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
            h = _normalize(params, name, h, *stats[name])
        else:
            h = _apply(layer, name, params, h)
    raise KeyError(stop)
