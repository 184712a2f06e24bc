"""Canonical member chunks: a cell's numbers do not depend on what else was asked for.

Seeds train as a batch dimension, and an elementwise kernel treats a value differently by
its place in the stacked tensor: a vector path over whole blocks of values and a scalar
path over the rest, which can differ in the last bit for ``pow`` or ``sigmoid``
(docs/reproducibility.md). So a member's numbers would depend on how many members it was
stacked with and where it sat among them.

Chunks fix both. Seed ``s`` of a variant always trains in chunk ``s // C`` of that variant,
at position ``s % C``, beside exactly the seeds ``C·k … C·k + C - 1`` and nothing else
(``C`` = ``Suite.chunk``). Every run of a cell, whatever it was asked
for with, trains that same chunk as its own job: every kernel sees the same shapes and the
member sits at the same place. Asking for fewer seeds than a chunk holds still trains the
whole chunk; the seeds nobody asked for are trained and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.contract.suite import Suite


@dataclass(frozen=True)
class Chunk:
    """Chunk ``index`` of ``variant``: seeds ``index·size … index·size + size - 1``, of
    which ``wanted`` were asked for."""

    variant: str
    index: int
    size: int
    wanted: tuple[int, ...]

    @property
    def seeds(self) -> list[int]:
        return list(range(self.index * self.size, (self.index + 1) * self.size))

    def record(self) -> dict[str, int]:
        """What a cell's environment keeps of it (its seeds follow from these)."""
        return {"size": self.size, "index": self.index}


def covering(variant: str, seeds: Iterable[int], size: int) -> list[Chunk]:
    """The chunks of ``variant`` holding ``seeds``, in seed order."""
    if size < 1:
        raise ValueError(f"a chunk holds at least 1 seed, got {size}")
    wanted: dict[int, list[int]] = {}
    for seed in sorted(set(seeds)):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seeds are integers from 0, got {seed!r}")
        wanted.setdefault(seed // size, []).append(seed)
    return [Chunk(variant, k, size, tuple(s)) for k, s in wanted.items()]


def chunks(suite: Suite, variants: Iterable[str], seeds: Iterable[int]) -> list[Chunk]:
    """Every chunk the cells ``variants × seeds`` train in, variant by variant."""
    seeds = list(seeds)
    return [c for v in variants for c in covering(v, seeds, suite.chunk)]


def members_trained(suite: Suite, variants: Iterable[str], seeds: Iterable[int]) -> int:
    """How many members training ``variants × seeds`` trains (whole chunks)."""
    return sum(c.size for c in chunks(suite, variants, seeds))
