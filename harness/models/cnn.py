"""A small CNN for 32×32 (CIFAR-style) inputs, vmap-friendly (no BatchNorm running stats)."""

from __future__ import annotations

from torch import nn


def small_cnn(in_channels: int, num_classes: int, width: int = 32) -> nn.Sequential:
    """conv(w)-pool-conv(2w)-pool-conv(4w)-pool → FC 256 → classes; inputs [B, C, 32, 32]."""
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(
        *block(in_channels, width), *block(width, 2 * width), *block(2 * width, 4 * width),
        nn.Flatten(), nn.Linear(4 * width * 4 * 4, 256), nn.ReLU(), nn.Linear(256, num_classes),
    )
