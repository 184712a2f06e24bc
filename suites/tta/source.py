"""The suite's fixtures: the corrupted digits pool and each seed's source model.

Both are built by the trusted side, once, and cached content-addressed by
:mod:`harness.data.fixtures` (a second run reuses them). The source model is trained with
plain cross-entropy on the clean training digits (or CIFAR-10 for the opt-in variant):
Adam, train-mode BatchNorm keeping running statistics for the ``source`` normalization.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from harness.contract import draws
from suites.tta import CORRUPTIONS, HELD_OUT, SEVERITIES
from suites.tta import model as m

BASE_SEED = 20_261_202  # image i of corruption c: RandomState(BASE_SEED + 10⁴·c + i)


def corruption_seed(c: int) -> int:
    """The seed of corruption ``c``'s first image. Every severity draws the same random
    numbers for an image, so its severities differ only by their parameters."""
    # keyed: 31 bits, so that the image offsets added to it stay a RandomState seed
    return draws.seed(BASE_SEED + 10_000 * c, "tta-corruption", bits=31)


def build_digits_c(config: dict[str, Any], seed: int | None) -> dict[str, np.ndarray]:
    """``images [19, 5, 797, 64]``: every pool image under every corruption (the 15, then
    the 4 held out) at every severity; the clean pool is ``harness.data.digits``' test split."""
    from harness.data.digits import digits_split
    from suites.tta.corruptions import corrupt

    _, _, x, _ = digits_split()
    images = x.reshape(-1, 8, 8)
    out = np.empty((len(CORRUPTIONS) + len(HELD_OUT), len(SEVERITIES), len(x), 64), np.float32)
    for c, name in enumerate((*CORRUPTIONS, *HELD_OUT)):
        for j, s in enumerate(SEVERITIES):
            out[c, j] = corrupt(images, name, s, corruption_seed(c)).reshape(len(x), 64)
    return {"images": out}


def build_source_model(config: dict[str, Any], seed: int | None) -> dict[str, np.ndarray]:
    """One seed's source model: its parameters and BatchNorm running statistics."""
    if seed is None:
        raise ValueError("a source model is built per seed")
    x, y = training_set(config)
    params = train_source(config["architecture"], x, y, seed, epochs=int(config["epochs"]),
                          lr=float(config["lr"]), batch_size=int(config["batch_size"]),
                          device=config.get("device", "cpu"))
    return {k: v.numpy() for k, v in params.items()}


def training_set(config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The clean training inputs and labels the source model learns (and EATA's Fisher
    samples come from)."""
    if config["dataset"] == "digits":
        from harness.data.digits import digits_split

        x, y, _, _ = digits_split()
        return x, y
    from harness.data import data_root
    from harness.data.real import load_cifar10

    d = load_cifar10(config.get("data_root") or data_root(),
                     download=bool(config.get("download")))
    return d.x_train, d.y_train


def train_source(architecture: str, x: np.ndarray, y: np.ndarray, seed: int, *, epochs: int,
                 lr: float, batch_size: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Plain CE with Adam, shuffled batches from ``default_rng(seed)``; running statistics
    updated as ``nn.BatchNorm`` does."""
    params = {k: v.to(device) for k, v in m.init(
        architecture, draws.seed(seed, "tta-source-init")).items()}
    trained = [n for n in params if "running" not in n]
    running = {n: params[n] for n in params if "running" in n}
    for n in trained:
        params[n].requires_grad_(True)
    opt = torch.optim.Adam([params[n] for n in trained], lr=lr)
    xs, ys = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    rng = np.random.default_rng(draws.seed(seed, "tta-source-order"))
    for _ in range(epochs):
        order = torch.from_numpy(rng.permutation(len(y))).to(device)
        for start in range(0, len(y) - 1, batch_size):
            idx = order[start:start + batch_size]
            if len(idx) < 2:  # batch statistics of one sample are undefined
                continue
            logits, _ = m.forward(architecture, params, xs[idx], running=running)
            loss = torch.nn.functional.cross_entropy(logits, ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach().cpu().clone() for k, v in params.items()}
