"""Computed payloads, cached in :class:`~harness.storage.models.TableCache` and revalidated cheaply.

A payload is stored under a key with a *fingerprint* of the cells it depends on:
``finished:changes`` summed over the :class:`~harness.storage.models.CellTally` rows of a suite
version (or of one variant, or one objective version), which database triggers keep as
cells are written. A page first reads the tallies for every fingerprint it needs (a few
rows per variant, not an aggregate over the cells), then all its payloads in one query; a
changed fingerprint (a cell landed, was rerun or deleted) recomputes that payload and
stores it. Computing the fingerprint *before* the payload
means a cell that lands meanwhile can only make the stored entry look stale, never fresh.
Keys carry a hash of the code that computes payloads (this package, the tables, the
statistics) and of every registered suite's declaration, so a deploy that changes how
numbers are computed never serves old ones.

What a landing cell recomputes (:mod:`~webapp.leaderboard.state`): per-variant payloads
(a variant's table, its headline values) are keyed by that variant's fingerprint and the
suite's table versions, so a cell of variant A leaves variant B's untouched; suite-wide
payloads (summary, suite page, home) are recombined from the per-variant ones instead of
re-reading every cell; and paired comparisons are remembered by their inputs
(``harness.report.tables.comparison_key``), so a variant table rebuilt for one objective's new
cell recomputes that objective's comparisons only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Sum

from harness.contract.suite import Suite
from harness.report.jsonsafe import finite_or_none
from harness.storage.models import CellTally, TableCache

EMPTY = "0:0"


def _code_version() -> str:
    from harness.contract import registry, suite
    from harness.report import budget, stats, tables
    here = sorted(Path(__file__).parent.glob("*.py"))
    files = [*here, *(Path(m.__file__) for m in (tables, stats, suite, budget))]
    text = "".join(p.read_text() for p in files) + repr(registry.all_suites())
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# Part of every cache key.
PAYLOAD_VERSION = _code_version()


def fingerprint(finished: int, changes: int) -> str:
    return f"{finished}:{changes}"


def combine(parts: Iterable[str]) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def tallies(*group: str, **where) -> list[dict]:
    """``finished`` and ``changes`` summed over the tallies matching ``where``, per
    ``group`` fields: one query over the tally table (one row per version and variant)."""
    return list(CellTally.objects.filter(**where).values(*group).order_by()
                .annotate(n=Sum("finished"), c=Sum("changes")))


def suite_fingerprints(suite: Suite) -> tuple[str, dict[str, str]]:
    """(suite fingerprint, {variant: fingerprint}) of finished cells, one query; a variant
    without finished cells is not in the dict."""
    return _combined(tallies("variant", suite=suite.name, suite_version=suite.version))


def all_fingerprints() -> dict[tuple[str, str], str]:
    """{(suite, suite version): fingerprint} of every suite's finished cells, one query."""
    return {k: fp for k, (fp, _) in all_variant_fingerprints().items()}


def all_variant_fingerprints() -> dict[tuple[str, str], tuple[str, dict[str, str]]]:
    """{(suite, suite version): (fingerprint, {variant: fingerprint})}, one query: what
    :func:`suite_fingerprints` gives, for every suite at once."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for a in tallies("suite", "suite_version", "variant"):
        groups.setdefault((a["suite"], a["suite_version"]), []).append(a)
    return {k: _combined(rows) for k, rows in groups.items()}


def _combined(agg: list[dict]) -> tuple[str, dict[str, str]]:
    # a variant whose cells were all deleted or rerun keeps a tally (its changes count),
    # but has no results: it is left out of the per-variant dict, not out of the sum
    per_variant = {a["variant"]: fingerprint(a["n"], a["c"]) for a in agg if a["n"]}
    if not agg:
        return EMPTY, {}
    return fingerprint(sum(a["n"] for a in agg), sum(a["c"] for a in agg)), per_variant


Stored = dict[str, tuple[str, dict]]  # key -> (fingerprint, payload)


def read(keys: Iterable[str]) -> Stored:
    """The stored entries of ``keys``, whatever their fingerprints, in one query."""
    return {k: (f, p) for k, f, p in TableCache.objects.filter(
        key__in=list(keys)).values_list("key", "fingerprint", "payload")}


def jsonable(payload: dict) -> dict:
    """The payload as it reads back from storage (NaN → None, keys as strings)."""
    try:  # most payloads hold no NaN: skip the Python walk over megabytes
        text = json.dumps(payload, allow_nan=False)
    except ValueError:
        text = json.dumps(finite_or_none(payload), allow_nan=False)
    return json.loads(text)


def store(entries: list[tuple[str, str, dict]]) -> None:
    """Upsert (key, fingerprint, jsonable payload) in one statement; a concurrent request
    storing the same key is as good (its fingerprint was taken before its build too)."""
    if not entries:
        return
    try:
        with transaction.atomic():
            TableCache.objects.bulk_create(
                [TableCache(key=k, fingerprint=f, payload=p) for k, f, p in entries],
                update_conflicts=True, unique_fields=["key"],
                update_fields=["fingerprint", "payload", "updated"])
    except IntegrityError:  # pragma: no cover - a race the upsert itself resolves
        pass


def cached(items: list[tuple[str, str, Callable[[], dict]]],
           stored: Stored | None = None) -> list[dict]:
    """Payloads for (key, fingerprint, build): one read for all (or ``stored``, read
    already); rebuild the stale ones."""
    if stored is None:
        stored = read(k for k, _, _ in items)
    out = []
    for key, fp, build in items:
        hit = stored.get(key)
        if hit is not None and hit[0] == fp:
            out.append(hit[1])
            continue
        payload = jsonable(build())
        store([(key, fp, payload)])
        out.append(payload)
    return out


def key(kind: str, *parts: object) -> str:
    return ":".join([kind, PAYLOAD_VERSION, *(str(p) for p in parts)])
