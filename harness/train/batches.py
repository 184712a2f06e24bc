"""Where training batches come from: samplers a suite hands to the trainer.

A sampler yields, for each (epoch, step), a dict of tensors with the members on dim 0
(``[M, B, ...]``); the trainer passes member ``m``'s slice of it to the suite's member
loss. Each member draws its own data order from its seed's stream, so seed k sees the
same order whatever the objective (paired seeds).

- :class:`Shuffled` — one dataset, reshuffled every epoch per member, in batches: class
  labels (inputs shared by every member, each member's own labels), token sequences with
  their masks, anything indexed by sample;
- :class:`Paired` — two samplers stepped together (a forget batch with a retain batch),
  the epoch being the first one's; the second cycles through its own epochs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

import torch
from torch import Tensor

from harness.contract import seeding

Batch = dict[str, "Tensor | Batch"]


class Sampler(Protocol):
    members: int
    size: int  # samples per member and epoch (the per-sample ``state`` has this length)
    steps_per_epoch: int

    def batch(self, epoch: int, step: int) -> Batch: ...

    def to(self, device: str) -> Sampler: ...


def epoch_orders(seeds: list[int], n: int, epochs: int, *stream: str | int) -> Tensor:
    """[E, M, N] data order per epoch and member, from each seed's own stream."""
    orders = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seeding.stream_seed(seed, seeding.ORDER, *stream))
        orders.append(torch.stack([torch.randperm(n, generator=gen) for _ in range(epochs)]))
    return torch.stack(orders, dim=1)


class Shuffled:
    """Batches of one dataset in each member's own order, reshuffled every epoch.

    ``shared`` tensors are ``[N, ...]`` (the same for every member: inputs), ``own``
    tensors ``[M, N, ...]`` (per member: its own, e.g. noisy, labels). Every batch also holds
    ``index``, the samples' indices ``[M, B]``. The last batch of an epoch may be short.
    ``stream`` names a separate order stream (a second sampler of the same seeds).
    """

    def __init__(self, seeds: list[int], batch_size: int, epochs: int, *,
                 shared: Mapping[str, Tensor] | None = None,
                 own: Mapping[str, Tensor] | None = None, stream: tuple[str, ...] = ()):
        self.shared, self.own = dict(shared or {}), dict(own or {})
        sizes = {t.shape[0] for t in self.shared.values()} | {
            t.shape[1] for t in self.own.values()}
        if len(sizes) != 1:
            raise ValueError(f"every tensor must hold the same samples, got sizes {sizes}")
        if any(t.shape[0] != len(seeds) for t in self.own.values()):
            raise ValueError("per-member tensors need one row per seed")
        self.members, self.size = len(seeds), sizes.pop()
        self.batch_size, self.epochs = batch_size, epochs
        self.steps_per_epoch = math.ceil(self.size / batch_size)
        self.orders = epoch_orders(seeds, self.size, epochs, *stream)
        self._rows: Tensor | None = None

    def to(self, device: str) -> Shuffled:
        self.shared = {k: v.to(device) for k, v in self.shared.items()}
        self.own = {k: v.to(device) for k, v in self.own.items()}
        self.orders = self.orders.to(device)
        return self

    def batch(self, epoch: int, step: int) -> Batch:
        index = self.orders[epoch, :, step * self.batch_size:(step + 1) * self.batch_size]
        out: Batch = {k: t[index] for k, t in self.shared.items()}
        for k, t in self.own.items():
            if t.dim() == 2:
                out[k] = torch.gather(t, 1, index)
            else:
                if self._rows is None or self._rows.device != t.device:
                    self._rows = torch.arange(self.members, device=t.device)[:, None]
                out[k] = t[self._rows, index]
        out["index"] = index
        return out


class Paired:
    """Two samplers stepped together: ``{first_name: batch, second_name: batch}``.

    The epoch is the first sampler's; the second continues through its own epochs
    (build it with enough of them: :meth:`epochs_needed`).
    """

    def __init__(self, first: Sampler, second: Sampler, names: tuple[str, str]):
        if first.members != second.members:
            raise ValueError("both samplers must have the same members")
        self.first, self.second, self.names = first, second, names
        self.members, self.size = first.members, first.size
        self.steps_per_epoch = first.steps_per_epoch

    @staticmethod
    def epochs_needed(first_steps: int, epochs: int, second_steps_per_epoch: int) -> int:
        return math.ceil(first_steps * epochs / second_steps_per_epoch)

    def to(self, device: str) -> Paired:
        self.first, self.second = self.first.to(device), self.second.to(device)
        return self

    def batch(self, epoch: int, step: int) -> Batch:
        done = epoch * self.steps_per_epoch + step
        k = self.second.steps_per_epoch
        return {self.names[0]: self.first.batch(epoch, step),
                self.names[1]: self.second.batch(done // k, done % k)}
