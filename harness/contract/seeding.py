"""Independent random streams derived from (seed, purpose, ...).

Each seed has its own init, data order and noise draw, and each comes from its
own stream, so seed k sees the same noise and order whatever the objective is
(paired seeds) and changing one purpose's use of randomness moves no other.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from harness.contract import draws

if TYPE_CHECKING:
    import numpy as np

INIT, ORDER, NOISE, SPLIT = "init", "order", "noise", "split"

# The factors a factorial run varies one at a time. Every purpose other than INIT and
# ORDER (the noise draw, a split, an attack's start) follows NOISE: the data's draw.
FACTORS = (INIT, ORDER, NOISE)

# A factorial seed packs one level per factor into one integer that fits the cells' seed
# column (32-bit): FACTORIAL_BASE + init·10⁶ + order·10³ + noise, levels 0–999. Plain
# seeds are the replicates below FACTORIAL_BASE.
FACTORIAL_BASE = 1_000_000_000
MAX_LEVELS = 1000


def factorial_seed(init: int, order: int, noise: int) -> int:
    """The seed whose init, order and noise streams are those of plain seeds ``init``,
    ``order`` and ``noise``: ``factorial_seed(s, s, s)`` trains exactly as seed ``s``."""
    levels = (init, order, noise)
    if any(not isinstance(x, int) or not 0 <= x < MAX_LEVELS for x in levels):
        raise ValueError(f"factor levels must be integers in [0, {MAX_LEVELS}), got {levels}")
    return FACTORIAL_BASE + init * MAX_LEVELS**2 + order * MAX_LEVELS + noise


def factorial_seeds(streams: Iterable[str], levels: int) -> list[int]:
    """Every combination of ``levels`` levels of the ``streams`` (level 0 of the others)."""
    streams = set(streams)
    ranges = [range(levels) if f in streams else range(1) for f in FACTORS]
    return [factorial_seed(*index) for index in itertools.product(*ranges)]


def factors(seed: int) -> tuple[int, int, int] | None:
    """(init, order, noise) levels of a factorial seed; None for a plain seed."""
    if seed < FACTORIAL_BASE:
        return None
    rest = seed - FACTORIAL_BASE
    return rest // MAX_LEVELS**2, rest // MAX_LEVELS % MAX_LEVELS, rest % MAX_LEVELS


def stream_seed(seed: int, purpose: str, *extra: str | int) -> int:
    """A 63-bit integer seed for ``purpose``; stable across processes and platforms, and
    an HMAC of the draws key where one is set (:mod:`harness.contract.draws`).

    For a factorial seed the purpose's own factor level stands in for the seed."""
    levels = factors(int(seed))
    if levels is not None:
        seed = levels[FACTORS.index(purpose) if purpose in FACTORS[:2] else 2]
    if draws.keyed():  # a server's secret draws (harness.contract.draws)
        return draws.derive("stream", int(seed), purpose, *extra)
    import numpy as np  # here: suite declarations import this module's names, not numpy

    words = [int(seed)] + [_word(x) for x in (purpose, *extra)]
    hi, lo = (int(w) for w in np.random.SeedSequence(words).generate_state(2, dtype=np.uint32))
    return ((hi << 32) | lo) & ((1 << 63) - 1)


def rng(seed: int, purpose: str, *extra: str | int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(stream_seed(seed, purpose, *extra))


def validation_rows(n: int, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The training rows a tuned run's search trains on and the ``share`` it validates on
    (a fixed draw per data set size, the same for every suite), both sorted."""
    import numpy as np

    generator = rng(0, ORDER, "validation-split", n)
    held = np.sort(generator.permutation(n)[:max(1, round(share * n))])
    return np.setdiff1d(np.arange(n), held), held


def _word(x: str | int) -> int:
    # Ints are hashed too: a raw int is ambiguous (SeedSequence ignores trailing zero
    # words, so (..., 0) equalled (...), and splits ints >= 2**32 into two words).
    text = f"int:{x}" if isinstance(x, int) else x
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


# The process's global torch generator is one for all threads: a seeded initialisation in
# one thread interleaved with draws in another (a model built, another seed's init) gives a
# different model. Every draw from it in harness code holds this lock (a worker trains
# several jobs in threads; the hostile corpus did and saw two inits of one seed differ).
_TORCH_GLOBAL = threading.RLock()


@contextmanager
def torch_global(seed: int | None = None) -> Iterator[None]:
    """The global torch RNG, this thread's alone until the block ends: seeded with ``seed``
    (if given) and restored after, so what the block draws moves nobody else's stream."""
    import torch

    with _TORCH_GLOBAL, torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        yield
