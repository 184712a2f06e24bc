"""A CIFAR-style ResNet (He et al. 2016, §4.2: 3 stages of ``n`` basic blocks, widths
16·w, 32·w, 64·w; n = 3 is ResNet-20), with GroupNorm in place of BatchNorm.

Why GroupNorm: members train stacked under ``torch.func.vmap``, and BatchNorm's running
statistics are buffers updated in place during the forward pass, which a functional,
member-batched call cannot carry; GroupNorm has no running state and trains each
member exactly as it would alone (Wu & He 2018 report it within a point of BatchNorm at
these batch sizes).
"""

from __future__ import annotations

from torch import Tensor, nn


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.skip = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(groups, cout))

    def forward(self, x: Tensor) -> Tensor:
        out = self.norm1(self.conv1(x)).relu()
        return (self.norm2(self.conv2(out)) + self.skip(x)).relu()


def cifar_resnet(in_channels: int, num_classes: int, blocks: int = 3,
                 width: int = 1) -> nn.Sequential:
    """ResNet-(6·blocks+2) for [B, C, 32, 32] inputs; 0.27 M parameters at the defaults."""
    widths = [16 * width, 32 * width, 64 * width]
    groups = 4
    layers: list[nn.Module] = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
                               nn.GroupNorm(groups, widths[0]), nn.ReLU()]
    cin = widths[0]
    for stage, cout in enumerate(widths):
        for b in range(blocks):
            layers.append(_Block(cin, cout, 2 if stage and not b else 1, groups))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)
