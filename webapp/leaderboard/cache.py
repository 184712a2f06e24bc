"""Computed payloads, cached in :class:`~webapp.models.TableCache` and revalidated cheaply.

A payload is stored under a key with a *fingerprint* of the cells it depends on:
``count:max(id):max(finished_at)`` of the finished cells of a suite version (or of one
variant). A page first runs one aggregate query for every fingerprint it needs, then reads
all its payloads in one query; a changed fingerprint (a cell landed, was rerun or deleted)
recomputes that payload and stores it. Computing the fingerprint *before* the payload
means a cell that lands meanwhile can only make the stored entry look stale, never fresh.
Keys carry a hash of the code that computes payloads (this package, the tables, the
statistics) and of every registered suite's declaration, so a deploy that changes how
numbers are computed never serves old ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from harness.jsonsafe import finite_or_none
from harness.suite import Suite
from webapp.models import Cell, TableCache

EMPTY = "0:0:-"


def _code_version() -> str:
    from harness import registry, stats, suite, tables

    here = sorted(Path(__file__).parent.glob("*.py"))
    files = [*here, *(Path(m.__file__) for m in (tables, stats, suite))]
    text = "".join(p.read_text() for p in files) + repr(registry.all_suites())
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# Part of every cache key.
PAYLOAD_VERSION = _code_version()


def fingerprint(n: int, top: int | None, last) -> str:
    return f"{n}:{top or 0}:{last.isoformat() if last else '-'}"


def combine(parts: Iterable[str]) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def suite_fingerprints(suite: Suite) -> tuple[str, dict[str, str]]:
    """(suite fingerprint, {variant: fingerprint}) of finished cells, one aggregate query."""
    agg = list(Cell.objects.filter(suite=suite.name, suite_version=suite.version,
                                   status__in=Cell.FINISHED)
               .values("variant").order_by()
               .annotate(n=Count("id"), top=Max("id"), last=Max("finished_at")))
    per_variant = {a["variant"]: fingerprint(a["n"], a["top"], a["last"]) for a in agg}
    if not agg:
        return EMPTY, {}
    lasts = [a["last"] for a in agg if a["last"] is not None]
    return fingerprint(sum(a["n"] for a in agg), max(a["top"] for a in agg),
                       max(lasts) if lasts else None), per_variant


def all_fingerprints() -> dict[tuple[str, str], str]:
    """{(suite, suite version): fingerprint} of every suite's finished cells, one query."""
    agg = (Cell.objects.filter(status__in=Cell.FINISHED).values("suite", "suite_version")
           .order_by().annotate(n=Count("id"), top=Max("id"), last=Max("finished_at")))
    return {(a["suite"], a["suite_version"]): fingerprint(a["n"], a["top"], a["last"])
            for a in agg}


def cached(items: list[tuple[str, str, Callable[[], dict]]]) -> list[dict]:
    """Payloads for (key, fingerprint, build): one read for all; rebuild the stale ones."""
    stored = {k: (f, p) for k, f, p in TableCache.objects.filter(
        key__in=[k for k, _, _ in items]).values_list("key", "fingerprint", "payload")}
    out = []
    for key, fp, build in items:
        hit = stored.get(key)
        if hit is not None and hit[0] == fp:
            out.append(hit[1])
            continue
        payload = json.loads(json.dumps(finite_or_none(build()), allow_nan=False))
        try:
            with transaction.atomic():
                TableCache.objects.update_or_create(
                    key=key, defaults={"fingerprint": fp, "payload": payload})
        except IntegrityError:  # another request stored it first: theirs is as good
            pass
        out.append(payload)
    return out


def key(kind: str, *parts: object) -> str:
    return ":".join([kind, PAYLOAD_VERSION, *(str(p) for p in parts)])
