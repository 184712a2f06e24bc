"""Multi-layer perceptrons used by the classification suites."""

from __future__ import annotations

from torch import nn


def mlp(sizes: tuple[int, ...], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """``mlp((64, 256, 256, 10))``: Linear layers with an activation between them."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)
