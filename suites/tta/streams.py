"""The test streams of each scenario: which corrupted image comes when, in which batch,
and when the model is reset.

A stream is a sequence of *segments* (one domain: a corruption at a severity), each cut
into batches of the scenario's size; a batch never spans two segments, and a segment may
reset the model first. Every seed gets its own order of the same images, but the same
segment lengths and batch boundaries, so all seeds run as one vmapped batch of members.
Orders are drawn from ``numpy.random.default_rng([seed, scenario index])``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from harness.contract import draws

SCENARIOS = ("iid", "continual", "correlated", "mixed", "small-batch", "label-shift",
             "gradual")
GRADUAL = (1, 2, 3, 4, 5, 4, 3, 2, 1)  # severities of each corruption, in turn
MIN_CHUNK = 5  # TTAB's minimum chunk size in the Dirichlet class sorting


@dataclass(frozen=True)
class Segment:
    corruption: int  # index into the suite's corruption list (held-out ones after the 15)
    severity: int
    heldout: bool = False


@dataclass
class Stream:
    """One seed's stream: per sample, its segment and its image in the pool."""

    segments: list[Segment]
    segment: np.ndarray  # [T] segment index of each sample
    image: np.ndarray  # [T] index of the (uncorrupted) pool image
    batches: list[tuple[int, int]] = field(default_factory=list)  # [start, stop)
    resets: list[bool] = field(default_factory=list)  # per batch: reset the model before it


def build(scenario: str, labels: np.ndarray, *, corruptions: int, heldout: int, seed: int,
          batch_size: int, severity: int = 5, delta: float = 0.1,
          prior_concentration: float = 1.0) -> Stream:
    """The stream of ``scenario`` over a pool with ``labels`` (trusted: the class-sorted
    and label-shifted orders need the labels; the trainer never sees them)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r} (scenarios: {', '.join(SCENARIOS)})")
    rng = np.random.default_rng([draws.seed(seed, "tta-stream"), SCENARIOS.index(scenario)])
    n = len(labels)
    pool = np.arange(n)
    every = range(corruptions)
    # (segment, its order of pool images, reset before it)
    if scenario in ("iid", "small-batch"):
        parts = [(Segment(c, severity), rng.permutation(pool), True) for c in every]
        parts += [(Segment(corruptions + h, severity, heldout=True), rng.permutation(pool),
                   True) for h in range(heldout)] if scenario == "iid" else []
    elif scenario == "continual":
        parts = [(Segment(c, severity), rng.permutation(pool), c == 0) for c in every]
    elif scenario == "correlated":
        parts = [(Segment(c, severity), dirichlet_sorted(labels, delta, rng), True)
                 for c in every]
    elif scenario == "label-shift":
        parts = [(Segment(c, severity), label_shifted(labels, prior_concentration, rng), True)
                 for c in every]
    elif scenario == "gradual":
        parts = [(Segment(c, s), rng.permutation(pool), c == 0 and j == 0)
                 for c in every for j, s in enumerate(GRADUAL)]
    else:
        return _mixed(n, corruptions, severity, batch_size, rng)
    stream = Stream([s for s, _, _ in parts],
                    np.concatenate([np.full(len(o), i) for i, (_, o, _) in enumerate(parts)]),
                    np.concatenate([o for _, o, _ in parts]))
    start = 0
    for _, order, reset in parts:
        stop = start + len(order)
        cut = [(b, min(b + batch_size, stop)) for b in range(start, stop, batch_size)]
        stream.batches += cut
        stream.resets += [reset] + [False] * (len(cut) - 1)
        start = stop
    return stream


def shifted(stream: Stream, by: int) -> Stream:
    """``stream`` with its segments' corruption indices moved by ``by``: a stream built over
    the held-out corruptions alone (a tuned search's), which follow the benchmark's."""
    stream.segments = [replace(g, corruption=g.corruption + by) for g in stream.segments]
    return stream


def _mixed(n: int, corruptions: int, severity: int, batch_size: int,
           rng: np.random.Generator) -> Stream:
    """Every corruption's images shuffled into one stream (a segment per corruption, its
    samples interleaved with the others'), one reset at the start."""
    segment = np.repeat(np.arange(corruptions), n)
    image = np.tile(np.arange(n), corruptions)
    order = rng.permutation(len(segment))
    stream = Stream([Segment(c, severity) for c in range(corruptions)], segment[order],
                    image[order])
    total = len(order)
    stream.batches = [(s, min(s + batch_size, total)) for s in range(0, total, batch_size)]
    stream.resets = [b == 0 for b in range(len(stream.batches))]
    return stream


def dirichlet_sorted(labels: np.ndarray, delta: float, rng: np.random.Generator,
                     min_size: int = MIN_CHUNK) -> np.ndarray:
    """A class-correlated order of ``labels``' indices (TTAB's ``_intra_non_iid_shift``,
    Döbler's ``sort_by_dirichlet``): split each class over K chunks in ``Dir(δ·1)``
    proportions (chunks already holding N/K samples get no more), redrawn until every chunk
    has ``min_size``; then each chunk, in turn, lists its classes in a random order."""
    classes = np.unique(labels)
    k, n = len(classes), len(labels)
    while True:
        chunks: list[list[int]] = [[] for _ in range(k)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            q = rng.dirichlet(np.full(k, delta))
            q = q * np.array([len(chunk) < n / k for chunk in chunks])
            q = q / q.sum() if q.sum() > 0 else np.full(k, 1 / k)
            cuts = (np.cumsum(q) * len(idx)).astype(int)[:-1]
            for chunk, part in zip(chunks, np.split(idx, cuts), strict=True):
                chunk.extend(part.tolist())
        if min(len(chunk) for chunk in chunks) >= min_size:
            break
    order: list[int] = []
    for chunk in chunks:
        members = np.array(chunk)
        for c in rng.permutation(np.unique(labels[members])):
            order.extend(members[labels[members] == c].tolist())
    return np.array(order)


def label_shifted(labels: np.ndarray, concentration: float,
                  rng: np.random.Generator) -> np.ndarray:
    """As many samples as the pool, drawn (with replacement within a class) with class
    priors ``q ~ Dir(concentration·1)`` (TTAB's constant-size Dirichlet), shuffled."""
    classes = np.unique(labels)
    q = rng.dirichlet(np.full(len(classes), concentration))
    counts = rng.multinomial(len(labels), q)
    picks = [rng.choice(np.flatnonzero(labels == c), size=m, replace=True)
             for c, m in zip(classes, counts, strict=True) if m]
    return rng.permutation(np.concatenate(picks))
