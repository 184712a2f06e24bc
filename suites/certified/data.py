"""The certified suite's data and threat model: datasets in model-input space and the
L∞ box around each input (normalised per channel for CIFAR)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from harness.data import data_root
from suites.certified import bounds

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray  # model inputs (normalised where the dataset is)
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    mean: tuple[float, ...] | None = None  # per-channel normalisation (CIFAR)
    std: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Box:
    """The threat model in model-input space: the pixel ε-ball ∩ [0, 1]^d, normalised.

    With normalisation ``(x − μ_c)/σ_c`` the radius is ε/σ_c per channel and the box is
    clipped to ``[−μ_c/σ_c, (1 − μ_c)/σ_c]`` (pixel ε, as CIFAR papers state it); without, it
    is ε and [0, 1].
    """

    scale: Tensor | float = 1.0  # 1/σ_c, shaped [C, 1, 1]
    x_min: Tensor | float = 0.0
    x_max: Tensor | float = 1.0

    @classmethod
    def of(cls, data: Dataset, device: str = "cpu") -> Box:
        if data.std is None:
            return cls()
        mean = torch.tensor(data.mean, device=device).view(-1, 1, 1)
        std = torch.tensor(data.std, device=device).view(-1, 1, 1)
        return cls(1.0 / std, -mean / std, (1.0 - mean) / std)

    def radius(self, eps: float) -> Tensor | float:
        return eps * self.scale

    def limits(self, x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        return bounds.input_box(x, self.radius(eps), self.x_min, self.x_max)

    def ibp(self, model: nn.Module, params: dict[str, Tensor], x: Tensor, eps: float,
            y: Tensor) -> Tensor:
        return bounds.ibp_margins(model, params, x, self.radius(eps), y, x_min=self.x_min,
                                  x_max=self.x_max)

    def crown(self, model: nn.Module, params: dict[str, Tensor], x: Tensor, eps: float,
              y: Tensor, intermediate: str = "crown") -> Tensor:
        return bounds.crown_margins(model, params, x, self.radius(eps), y,
                                    intermediate=intermediate, x_min=self.x_min,
                                    x_max=self.x_max)



def load_dataset(name: str, root: str | None, download: bool) -> Dataset:
    if name == "digits":
        from harness.data.digits import digits_split

        x_tr, y_tr, x_te, y_te = digits_split()
        return Dataset(x_tr, y_tr, x_te, y_te, 10)
    from harness.data import real

    root = data_root(root)
    if name == "mnist":
        ds = real.load_mnist(root, download=download)
        return Dataset(ds.x_train, ds.y_train, ds.x_test, ds.y_test, ds.num_classes)
    if name == "cifar10":
        ds = real.load_cifar10(root, download=download)
        mean = np.array(CIFAR_MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
        std = np.array(CIFAR_STD, dtype=np.float32).reshape(1, 3, 1, 1)
        return Dataset((ds.x_train - mean) / std, ds.y_train, (ds.x_test - mean) / std,
                       ds.y_test, ds.num_classes, CIFAR_MEAN, CIFAR_STD)
    raise ValueError(f"unknown dataset {name!r}")

