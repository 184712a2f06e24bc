"""Per variant, the headline numbers the family plot and the objective pages recombine.

A *piece* holds, for each table version with a finished cell in one variant: its diverged
and failed counts, the mean of its ok cells' headline values and its family-plot point
(``stats.summarize`` of the values). Pieces are cached per variant like the variant's
table (:meth:`SuiteState.variant_fp`), so a cell landing in one variant rebuilds one
piece (two small queries) and the others are read back.

Numbers are stored as base64 of their float64 bytes: exact, NaN-safe, and far cheaper to
read back than a JSON number each.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from django.db.models import Count

from harness.contract.suite import Suite
from harness.report import stats
from harness.storage.models import Cell, Metric, ObjectiveVersion
from webapp.leaderboard import cache
from webapp.leaderboard.state import SuiteState, resolve, versions_key


@dataclass(frozen=True)
class Piece:
    """One variant's decoded piece."""

    entered: list[int]  # version ids with a finished cell in the variant
    diverged: dict[int, int]
    failed: dict[int, int]
    means: dict[int, float]  # versions with ok values: np.mean of the values (by seed)
    points: dict[int, list[float]]  # the same versions: [mean, ci_low, ci_high]


def headline_values(suite: Suite, versions: Iterable[ObjectiveVersion | int],
                    variants: list[str]) -> dict[int, dict[str, dict[int, float]]]:
    """{version id: {variant: {seed: headline}}} of ok cells (finite values, seeds in
    order), one query."""
    out: dict[int, dict[str, dict[int, float]]] = {}
    rows = Metric.objects.filter(
        name=suite.headline, cell__suite=suite.name, cell__suite_version=suite.version,
        cell__status=Cell.OK, cell__variant__in=variants,
        cell__version__in=[v if isinstance(v, int) else v.pk for v in versions],
    ).order_by("cell__version_id", "cell__seed").values_list(
        "cell__version_id", "cell__variant", "cell__seed", "value")
    for vid, variant, seed, value in rows:
        if math.isfinite(value):
            out.setdefault(vid, {}).setdefault(variant, {})[seed] = value
    return out


def headline_pieces(state: SuiteState, variants: list[str]) -> dict[str, Piece]:
    """The variants' pieces: one cache read; the stale ones rebuilt together (two
    queries) and stored in one statement."""
    suite = state.suite
    keys = {v: cache.key("headline", suite.name, suite.version, v) for v in variants}
    stored = cache.read([versions_key(suite), *keys.values()])
    resolve(state, stored)
    raw, stale = {}, []
    for v, k in keys.items():
        hit = stored.get(k)
        if hit is not None and hit[0] == state.variant_fp(v):
            raw[v] = hit[1]
        else:
            stale.append(v)
    if stale:
        fps = {v: state.variant_fp(v) for v in stale}  # taken before the build
        built = _build(state, stale)
        cache.store([(keys[v], fps[v], built[v]) for v in stale])
        raw.update(built)
    return {v: _decode(raw[v]) for v in variants}


def _build(state: SuiteState, variants: list[str]) -> dict[str, dict]:
    suite = state.suite
    ids = [v.pk for v in state.versions]
    counts: dict[str, dict[int, dict[str, int]]] = {v: {} for v in variants}
    for variant, vid, status, n in (Cell.objects.filter(
            suite=suite.name, suite_version=suite.version, status__in=Cell.FINISHED,
            variant__in=variants, version__in=ids)
            .values_list("variant", "version_id", "status").order_by()
            .annotate(n=Count("id"))):
        counts[variant].setdefault(vid, {})[status] = n
    values = headline_values(suite, ids, variants)
    return {v: _encode(counts[v], {vid: per[v] for vid, per in values.items() if v in per})
            for v in variants}


def _encode(counts: dict[int, dict[str, int]], values: dict[int, dict[int, float]]) -> dict:
    entered = sorted(counts)
    with_values = [vid for vid in entered if values.get(vid)]
    numbers = []
    for vid in with_values:
        x = list(values[vid].values())
        s = stats.summarize(x)
        numbers += [float(np.mean(x)), s.mean, s.ci_low, s.ci_high]
    return {"entered": entered,
            "diverged": [counts[vid].get(Cell.DIVERGED, 0) for vid in entered],
            "failed": [sum(n for st, n in counts[vid].items()
                           if st not in (Cell.OK, Cell.DIVERGED)) for vid in entered],
            "with_values": with_values, "numbers": _pack(np.asarray(numbers, dtype="<f8"))}


def _decode(raw: dict) -> Piece:
    numbers = _unpack(raw["numbers"], "<f8").tolist()
    ids = raw["with_values"]
    return Piece(entered=raw["entered"],
                 diverged=dict(zip(raw["entered"], raw["diverged"], strict=True)),
                 failed=dict(zip(raw["entered"], raw["failed"], strict=True)),
                 means={vid: numbers[4 * i] for i, vid in enumerate(ids)},
                 points={vid: numbers[4 * i + 1:4 * i + 4] for i, vid in enumerate(ids)})


def _pack(a: np.ndarray) -> str:
    return base64.b64encode(a.tobytes()).decode("ascii")


def _unpack(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype)
