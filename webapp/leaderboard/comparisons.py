"""Paired comparisons remembered between builds of a variant's table.

``stats.compare_paired`` (a 2,000-resample bootstrap, ~4 ms) is a pure function of its two
value lists, so its result is stored by :func:`harness.report.tables.comparison_key` beside the
table. A table rebuilt because one objective's cell landed looks every comparison up and
recomputes only the ones whose inputs changed: that objective's against the reference and
the best (all of them only when the reference or the best itself changed). Content keys
cannot go stale, so a concurrent build may overwrite the memo freely. The cache key
carries the code hash of the statistics (``cache.PAYLOAD_VERSION``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

from harness.contract.suite import Suite
from harness.report import stats
from webapp.leaderboard import cache


class Memo(MutableMapping):
    """Comparisons known from the last build; what this build used is kept for the next."""

    def __init__(self, known: dict[str, stats.PairedComparison]):
        self.known, self.used = known, {}
        self.computed = 0

    def __getitem__(self, key: str) -> stats.PairedComparison:
        if key not in self.used:
            self.used[key] = self.known[key]
        return self.used[key]

    def __setitem__(self, key: str, value: stats.PairedComparison) -> None:
        self.computed += 1
        self.used[key] = value

    def __delitem__(self, key: str) -> None:
        self.used.pop(key, None)
        self.known.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**self.known, **self.used})

    def __len__(self) -> int:
        return len({**self.known, **self.used})


def memo_key(suite: Suite, variant: str) -> str:
    return cache.key("comparisons", suite.name, suite.version, variant)


@contextmanager
def comparisons(suite: Suite, variant: str) -> Iterator[Memo]:
    """The variant's memo (one read); on exit, the comparisons this build used (one write)."""
    key = memo_key(suite, variant)
    stored = cache.read([key]).get(key)
    memo = Memo({k: _comparison(v) for k, v in stored[1].items()} if stored else {})
    yield memo
    if memo.computed or memo.used.keys() != memo.known.keys():  # else it is stored already
        cache.store([(key, "-", {k: _fields(c) for k, c in memo.used.items()})])


def _fields(c: stats.PairedComparison) -> dict:
    return {f: (None if isinstance(x, float) and not math.isfinite(x) else x)
            for f, x in dataclasses.asdict(c).items()}


def _comparison(fields: dict) -> stats.PairedComparison:
    return stats.PairedComparison(**{f: (math.nan if x is None else x) for f, x in fields.items()})
