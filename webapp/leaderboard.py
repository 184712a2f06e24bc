"""Every leaderboard table the pages and the JSON API show, built in one place.

Payloads are plain JSON-serializable dicts (NaN becomes ``None``). Statistics come
from :mod:`harness.stats` through :func:`harness.report.variant_tables`; nothing here
computes an interval of its own.

Which results a table uses: per suite version, the newest version of every
(objective, label) with finished cells (``storage.latest_versions``), plus the
suite's reference version (``storage.reference_version``).

Caching: a computed payload is stored in :class:`~webapp.models.TableCache` under a
key with a *fingerprint* of the cells it depends on: ``count:max(id):max(finished_at)``
of the finished cells of the suite version (or of one variant). A page first runs
one aggregate query for every fingerprint it needs, then reads all its payloads in
one query; a changed fingerprint (a cell landed, was rerun or deleted) recomputes
that payload and stores it. Computing the fingerprint *before* the payload means a
cell that lands meanwhile can only make the stored entry look stale, never fresh.
Keys carry a hash of this module's, ``harness.report``'s and ``harness.stats``' source,
so a deploy that changes how numbers are computed never serves old ones. Besides the
per-variant tables and per-suite summaries, the ranked home table and the suite page's
filtered view are cached the same way, and builders that only need a few rows (an
objective's profile, the family plot of the visible objectives) compute just those, so
no page waits for every variant table of a suite.

Normalized scores use fixed anchors per suite version (:data:`ANCHORS`), never
statistics of the submitted population, so adding a submission changes nobody
else's numbers; only rank positions move.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, Max, OuterRef

from harness import stats
from harness.report import CellRow, TableRow, variant_tables
from suites import get_suite, suite_names
from suites.base import Suite
from webapp import storage
from webapp.models import Cell, Curve, Metric, Objective, ObjectiveVersion, TableCache


def _code_version() -> str:
    """Hash of the code that computes payloads: a deploy that changes a payload's shape or
    its statistics gets new cache keys (old entries are simply never read again)."""
    from harness import report

    text = "".join(Path(m.__file__).read_text() for m in (sys.modules[__name__], report, stats))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# Part of every cache key.
PAYLOAD_VERSION = _code_version()

# Normalization anchors per (suite, suite version): headline metric -> (score mapped to 0,
# score mapped to 1). A suite may declare ``anchors`` itself (same shape), which wins.
# Smoke-run versions ("1.0+e2") use the anchors of their base version.
ANCHORS: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    # 10 classes in every variant (digits, MNIST, CIFAR-10): chance accuracy -> 0, 1.0 -> 1.
    ("noisy-labels", "1.0"): {"test_acc": (0.1, 1.0)},
}

# Variant config keys that can serve as the x axis of a family plot (noise rate, epsilon,
# severity), in order of preference. A suite may declare ``plot_axis = {"x": key,
# "label": text}`` instead.
AXIS_KEYS = ("rate", "eps", "epsilon", "severity", "level", "ratio")
AXIS_LABELS = {"rate": "noise rate", "eps": "ε", "epsilon": "ε", "severity": "severity"}

# Suite-specific scatter plots on objective pages: per-seed (x metric, y metric) pairs.
# A suite may declare ``scatter_plots`` (same shape) instead; a pair is drawn only when
# both metrics are stored.
SCATTERS: dict[str, tuple[dict[str, str], ...]] = {
    "certified": ({"x": "clean_acc", "y": "verified_acc"},),
}

KINDS = ("all", "builtin", "submitted")
RANK_METHOD = ("IQM of normalized headline means over the default variants of every suite "
               "the objective completed; normalization anchors are fixed per suite version")


class NotFound(KeyError):
    """An unknown suite, variant or objective (pages answer 404)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


# --- public API -------------------------------------------------------------------------

def variant_table(suite: Suite | str, variant: str) -> dict:
    """One variant's table, rows sorted best first (see module docstring for caching)."""
    suite = _suite(suite)
    _variant(suite, variant)
    _, per_variant = _suite_fingerprints(suite)
    return _variant_tables(suite, [variant], per_variant)[variant]


def suite_summary(suite: Suite | str) -> dict:
    """Per objective version: headline relative to the reference over the default variants.

    Row fields: ``delta`` = mean over seeds of (mean over variants of x − ref), raw metric
    units (x − ref even when lower is better; ``better`` says which way is good), its 95%
    percentile-bootstrap CI over paired seeds (seeds with values for both on every covered
    variant), ``distinguishable`` (CI excludes 0), ``normalized`` = mean over covered
    variants of the anchored headline mean, ``by_variant`` = per-variant normalized means.
    """
    suite = _suite(suite)
    fingerprint, _ = _suite_fingerprints(suite)
    return _summaries([(suite, fingerprint)])[suite.name]


def home_table(*, suite: str | None = None, kind: str = "all") -> dict:
    """Objectives × suites: each cell a :func:`suite_summary` row; cross-suite rank.

    ``score`` is the IQM of per-(suite, default variant) normalized means over the suites
    the objective completed (every default variant has a result); ``rank`` orders by it
    (ties share a rank) and is computed before the ``kind`` filter, so a filtered view keeps
    the global ranks. The ranked table is cached as a whole (one fingerprint query, one read).
    """
    if kind not in KINDS:
        raise NotFound(f"unknown filter {kind!r} (one of {', '.join(KINDS)})")
    suites = [_suite(suite)] if suite else [get_suite(n) for n in suite_names()]
    fps = _all_fingerprints()
    fingerprint = _combine(fps.get((s.name, s.version), _EMPTY) for s in suites)
    key = f"home:{PAYLOAD_VERSION}:{','.join(f'{s.name}@{s.version}' for s in suites)}"
    board = _cached([(key, fingerprint, lambda: _build_home(suites, fps))])[0]
    rows = board["rows"]
    if kind != "all":
        rows = [r for r in rows if r["is_builtin"] == (kind == "builtin")]
    # ``fingerprint`` identifies this exact table (data, code and filter): a key for
    # caching what is rendered from it (the home template caches its table by it).
    return {**board, "suite": suite, "kind": kind, "rows": rows,
            "fingerprint": _combine([key, fingerprint, kind])}


def _build_home(suites: list[Suite], fps: dict[tuple[str, str], str]) -> dict:
    summaries = _summaries([(s, fps.get((s.name, s.version), _EMPTY)) for s in suites])
    rows: dict[tuple[str, str], dict] = {}
    for s in suites:
        for r in summaries[s.name]["rows"]:
            row = rows.setdefault((r["slug"], r["label"]), {
                "objective": r["label"], "slug": r["slug"], "name": r["name"],
                "is_builtin": r["is_builtin"], "cells": {}, "_scores": []})
            row["cells"][s.name] = {k: x for k, x in r.items() if k != "by_variant"}
            if r["complete"] and r["by_variant"]:
                row["_scores"].extend(v for v in r["by_variant"].values() if v is not None)
    for row in rows.values():
        scores = row.pop("_scores")
        row["score"] = stats.iqm(scores) if scores else None
        row["score_n"] = len(scores)
    ordered = sorted(rows.values(), key=lambda r: (r["score"] is None, -(r["score"] or 0),
                                                    r["objective"]))
    rank, previous = 0, None
    for i, row in enumerate(ordered, 1):
        if row["score"] is None:
            row["rank"] = None
            continue
        if row["score"] != previous:
            rank, previous = i, row["score"]
        row["rank"] = rank
    shown = [s for s in suites if summaries[s.name]["rows"]]  # a suite without results
    return {"rank_method": RANK_METHOD,                         # gets no empty column
            "suites": [{k: summaries[s.name][k] for k in
                        ("suite", "suite_version", "description", "headline", "headline_label",
                         "percent", "higher_is_better", "reference", "variants", "anchors")}
                       for s in shown],
            "rows": ordered}


def suite_page(suite: Suite | str, variant: str | None = None, *, kind: str = "all",
               limit: int | None = None) -> dict:
    """What the suite page shows, from one fingerprint query and one cache read: suite
    metadata, the variants with their cell counts, the chosen variant (default: the first
    default variant with results), its table reduced to :func:`visible_rows` (``rows``;
    ``total_rows`` counts all), the strip-plot and family-plot data of those rows.

    The reduced view is cached per (variant, kind, limit) on the suite's fingerprint; on a
    miss it is cut from the cached full table and family series.
    """
    suite = _suite(suite)
    if kind not in KINDS:
        raise NotFound(f"unknown filter {kind!r} (one of {', '.join(KINDS)})")
    suite_fp, per_variant = _suite_fingerprints(suite)
    variants = [{"name": v.name, "description": v.description, "default": v.default,
                 "cells": int(per_variant.get(v.name, _EMPTY).split(":")[0])}
                for v in suite.variants]
    if variant is None:
        with_results = [v["name"] for v in variants if v["cells"]]
        defaults = [v for v in suite.default_variants if v in with_results]
        variant = (defaults or with_results or [suite.variants[0].name])[0]
    _variant(suite, variant)
    key = (f"suite-page:{PAYLOAD_VERSION}:{suite.name}:{suite.version}:{variant}:{kind}:"
           f"{limit}")
    view = _cached([(key, suite_fp,
                     lambda: _build_suite_view(suite, variant, per_variant, kind, limit))])[0]
    return {"suite": _suite_meta(suite), "variants": variants, "variant": variant, **view}


def _build_suite_view(suite: Suite, variant: str, per_variant: dict[str, str],
                      kind: str, limit: int | None) -> dict:
    table = _variant_tables(suite, [variant], per_variant)[variant]
    rows = visible_rows(table["rows"], kind=kind, limit=limit)
    series = _build_series(suite, rows)
    return {"table": {**table, "rows": rows}, "total_rows": len(table["rows"]),
            "axis": series["axis"], "strip": strip_plot(table, rows),
            "family": family_plot(series, [r["objective"] for r in rows],
                                  metric=table["headline_label"], percent=table["percent"])}


def family_series(suite: Suite | str) -> dict:
    """Headline mean and CI per objective across the variants of each family (same
    config but the x value: noise rate, ε), for line plots with CI bands."""
    suite = _suite(suite)
    suite_fp, _ = _suite_fingerprints(suite)
    return _cached([(_series_key(suite), suite_fp, lambda: _build_series(suite))])[0]


def variant_axis(suite: Suite) -> dict | None:
    """How variants line up on an x axis: {"x_key", "x_label", "families": [{"name",
    "variants", "x"}]}; None when no config key varies numerically.

    Families are variants with equal config apart from the x key; an x = 0 variant whose
    config differs from a family's in exactly one other key (``clean`` vs ``symmetric``)
    is that family's x = 0 point. Families need two points.
    """
    declared = getattr(suite, "plot_axis", None) or {}
    numeric = {v.name: v for v in suite.variants}
    key = declared.get("x")
    if key is None:
        for k in AXIS_KEYS:
            if sum(_is_number(v.config.get(k)) for v in numeric.values()) >= 2:
                key = k
                break
    if key is None:
        return None
    points = [v for v in suite.variants if _is_number(v.config.get(key))]
    rest = {v.name: {k: str(x) for k, x in v.config.items() if k != key} for v in points}
    groups: dict[tuple, list] = {}
    for v in points:
        groups.setdefault(tuple(sorted(rest[v.name].items())), []).append(v)
    zeros = [v for v in points if float(v.config[key]) == 0
             and len(groups[tuple(sorted(rest[v.name].items()))]) == 1]
    for z in zeros:
        for config, members in groups.items():
            other = dict(config)
            if z not in members and other.keys() == rest[z.name].keys() and sum(
                    other[k] != rest[z.name][k] for k in other) == 1:
                members.append(z)
    varying = {k for config in groups for k, _ in config
               if len({dict(c).get(k) for c in groups}) > 1}
    families = []
    for config, members in groups.items():
        if len(members) < 2:
            continue
        members = sorted(members, key=lambda v: float(v.config[key]))
        name = "/".join(x for k, x in config if k in varying) or suite.name
        families.append({"name": name, "variants": [m.name for m in members],
                         "x": [float(m.config[key]) for m in members],
                         "default": all(m.default for m in members)})
    if not families:
        return None
    return {"x_key": key, "x_label": declared.get("label") or AXIS_LABELS.get(key, key),
            "families": families}


def objective_profile(slug: str, viewer=None, *,
                      curves: str | Mapping[str, str] | None = "all") -> dict:
    """An objective's page: metadata, code (only if public or ``viewer`` owns it, else
    None), versions with hyperparameters, every suite's per-variant rows and summary,
    family and scatter plot data, and training curves.

    ``curves``: "all" (every suite and variant with results), {suite: variant} (those
    only; the objective page shows one variant per suite) or None.
    Curves: per version label and curve name, ``mean`` with a ±1 s.d. band (``low``,
    ``high``) over seeds at each step, and every seed's values (``seeds``); diverged seeds
    are truncated at divergence and listed in ``diverged``.
    """
    try:
        obj = Objective.objects.select_related("owner").get(slug=slug)
    except Objective.DoesNotExist:
        raise NotFound(f"no objective {slug!r}") from None
    versions = list(obj.versions.order_by("-created", "-id"))
    owner = obj.owner.get_username() if obj.owner else None
    mine = bool(viewer is not None and getattr(viewer, "is_authenticated", False)
                and obj.owner_id is not None and viewer.pk == obj.owner_id)
    code_visible = obj.visibility == Objective.PUBLIC or mine
    fps = _all_fingerprints()
    suites = [get_suite(n) for n in suite_names()]
    fingerprint = _combine(fps.get((s.name, s.version), _EMPTY) for s in suites)
    numbers = _cached([(f"profile:{PAYLOAD_VERSION}:{obj.pk}", fingerprint,
                        lambda: _build_profile(obj, suites, fps))])[0]
    curve_data: dict[str, dict[str, Any]] = {}
    if curves is not None and numbers["suites"]:
        curve_data = _profile_curves(obj, suites, numbers, fps, curves)
    newest = versions[0] if versions else None
    return {
        "slug": obj.slug, "name": obj.name, "description": obj.description,
        "paper_url": obj.paper_url or None, "owner": owner, "is_builtin": obj.is_builtin,
        "visibility": obj.visibility, "created": obj.created.isoformat(),
        "viewer_is_owner": mine, "code_visible": code_visible,
        "code": newest.code if newest is not None and code_visible else None,
        "versions": [{"id": v.pk, "label": v.label, "hyperparameters": v.hyperparameters,
                      "code_sha256": v.code_sha256, "created": v.created.isoformat()}
                     for v in versions],
        "suites": [{**s, "curves": curve_data.get(s["suite"], {})} for s in numbers["suites"]],
    }


def compare(slug_a: str, slug_b: str, suite: Suite | str) -> dict:
    """Two objectives side by side per variant, with paired-seed differences (a − b,
    positive = a better) from ``stats.compare_paired``, and an overall row over the
    default variants both have (paired over seeds of the mean over variants)."""
    suite = _suite(suite)
    if slug_a == slug_b:
        raise NotFound("compare two different objectives")
    a, b = _primary_version(slug_a, suite), _primary_version(slug_b, suite)
    fingerprint, _ = _suite_fingerprints(suite)
    key = f"compare:{PAYLOAD_VERSION}:{suite.name}:{suite.version}:{a.pk}:{b.pk}"
    return _cached([(key, fingerprint, lambda: _build_compare(suite, a, b))])[0]


def objective_suites(slug: str) -> list[str]:
    """Names of the suites (current versions) in which the objective has finished cells."""
    done = set(Cell.objects.filter(version__objective__slug=slug, status__in=Cell.FINISHED)
               .values_list("suite", "suite_version").distinct())
    return [n for n in suite_names() if (n, get_suite(n).version) in done]


def objective_choices() -> list[dict]:
    """Every objective with a finished cell: {"slug", "name", "is_builtin"}, by name."""
    finished = Cell.objects.filter(version__objective=OuterRef("pk"), status__in=Cell.FINISHED)
    rows = (Objective.objects.filter(Exists(finished)).order_by("name", "slug")
            .values("slug", "name", "is_builtin"))
    return list(rows)


# --- shaping payloads for pages (pure functions, no queries) ----------------------------

def visible_rows(rows: list[dict], *, kind: str = "all", limit: int | None = None) -> list[dict]:
    """Rows a page shows: built-in / submitted / all, the best ``limit``; the reference is
    always kept, so every P(improvement) shown has its baseline on screen."""
    if kind not in KINDS:
        raise NotFound(f"unknown filter {kind!r} (one of {', '.join(KINDS)})")
    keep = [r for r in rows if kind == "all" or r["is_reference"]
            or r["is_builtin"] == (kind == "builtin")]
    if limit is not None and len(keep) > limit:
        keep = keep[:limit] + [r for r in keep[limit:] if r["is_reference"]]
    return keep


def strip_plot(table: dict, rows: list[dict]) -> dict:
    """Per-seed headline values of ``rows`` (best first) for a strip/box plot."""
    return {"metric": table["headline_label"], "percent": table["percent"],
            "higher_is_better": table["higher_is_better"], "variant": table["variant"],
            "objectives": [{"label": r["objective"], "values": list(r["values"].values()),
                            "seeds": [int(k) for k in r["values"]],
                            "is_reference": r["is_reference"],
                            "tied_with_best": r["tied_with_best"]} for r in rows if r["seeds"]]}


def family_plot(series: dict, labels: Iterable[str], *, metric: str, percent: bool) -> dict:
    """Line-plot data per variant family: per objective, x and mean with CI band."""
    axis = series.get("axis")
    if not axis:
        return {"families": []}
    labels = [x for x in labels if x in series["series"]]
    families = []
    for fam in axis["families"]:
        lines = []
        for label in labels:
            s = series["series"][label]
            pts = [(x, s["points"].get(v)) for v, x in zip(fam["variants"], fam["x"],
                                                            strict=True)]
            pts = [(x, p) for x, p in pts if p is not None and p[0] is not None]
            if len(pts) >= 2:
                lines.append({"label": label, "is_reference": s["is_reference"],
                              "x": [x for x, _ in pts], "mean": [p[0] for _, p in pts],
                              "low": [p[1] for _, p in pts], "high": [p[2] for _, p in pts]})
        if lines:
            families.append({"name": fam["name"], "x_label": axis["x_label"],
                             "lines": lines})
    return {"metric": metric, "percent": percent, "families": families}


# --- exports ----------------------------------------------------------------------------

def export_tables(suite: Suite | str, variant: str | None = None) -> tuple[Suite, list[dict]]:
    """The tables an export covers: one variant, or every default variant with results."""
    suite = _suite(suite)
    _, per_variant = _suite_fingerprints(suite)
    if variant is not None:
        _variant(suite, variant)
        names = [variant]
    else:
        names = [v for v in suite.default_variants if v in per_variant]
    tables = _variant_tables(suite, names, per_variant)
    return suite, [tables[n] for n in names]


# --- fingerprints and the cache ---------------------------------------------------------

_EMPTY = "0:0:-"


def _fingerprint(n: int, top: int | None, last) -> str:
    return f"{n}:{top or 0}:{last.isoformat() if last else '-'}"


def _combine(parts: Iterable[str]) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def _suite_fingerprints(suite: Suite) -> tuple[str, dict[str, str]]:
    """(suite fingerprint, {variant: fingerprint}) of finished cells, one aggregate query."""
    agg = list(Cell.objects.filter(suite=suite.name, suite_version=suite.version,
                                   status__in=Cell.FINISHED)
               .values("variant").order_by()
               .annotate(n=Count("id"), top=Max("id"), last=Max("finished_at")))
    per_variant = {a["variant"]: _fingerprint(a["n"], a["top"], a["last"]) for a in agg}
    if not agg:
        return _EMPTY, {}
    lasts = [a["last"] for a in agg if a["last"] is not None]
    return _fingerprint(sum(a["n"] for a in agg), max(a["top"] for a in agg),
                        max(lasts) if lasts else None), per_variant


def _all_fingerprints() -> dict[tuple[str, str], str]:
    """{(suite, suite version): fingerprint} of every suite's finished cells, one query."""
    agg = (Cell.objects.filter(status__in=Cell.FINISHED).values("suite", "suite_version")
           .order_by().annotate(n=Count("id"), top=Max("id"), last=Max("finished_at")))
    return {(a["suite"], a["suite_version"]): _fingerprint(a["n"], a["top"], a["last"])
            for a in agg}


def _cached(items: list[tuple[str, str, Callable[[], dict]]]) -> list[dict]:
    """Payloads for (key, fingerprint, build): one read for all; rebuild the stale ones."""
    stored = {k: (f, p) for k, f, p in TableCache.objects.filter(
        key__in=[k for k, _, _ in items]).values_list("key", "fingerprint", "payload")}
    out = []
    for key, fingerprint, build in items:
        hit = stored.get(key)
        if hit is not None and hit[0] == fingerprint:
            out.append(hit[1])
            continue
        payload = json.loads(json.dumps(_jsonable(build()), allow_nan=False))
        try:
            with transaction.atomic():
                TableCache.objects.update_or_create(
                    key=key, defaults={"fingerprint": fingerprint, "payload": payload})
        except IntegrityError:  # another request stored it first: theirs is as good
            pass
        out.append(payload)
    return out


def _variant_key(suite: Suite, variant: str) -> str:
    return f"variant:{PAYLOAD_VERSION}:{suite.name}:{suite.version}:{variant}"


def _series_key(suite: Suite) -> str:
    return f"series:{PAYLOAD_VERSION}:{suite.name}:{suite.version}"


def _variant_tables(suite: Suite, variants: list[str],
                    per_variant: dict[str, str]) -> dict[str, dict]:
    items = [(_variant_key(suite, v), per_variant.get(v, _EMPTY),
              (lambda v=v: _build_variant_table(suite, v))) for v in variants]
    return dict(zip(variants, _cached(items), strict=True))


def _summaries(suites: list[tuple[Suite, str]]) -> dict[str, dict]:
    items = [(f"summary:{PAYLOAD_VERSION}:{s.name}:{s.version}", fp,
              (lambda s=s: _build_summary(s))) for s, fp in suites]
    return {s.name: p for (s, _), p in zip(suites, _cached(items), strict=True)}


# --- builders (run on a cache miss) -----------------------------------------------------

def _table_versions(suite: Suite) -> tuple[list[ObjectiveVersion], ObjectiveVersion | None]:
    versions = {v.pk: v for v in storage.latest_versions(suite)}
    ref = storage.reference_version(suite)
    if ref is not None:
        versions.setdefault(ref.pk, ref)
    objectives = Objective.objects.in_bulk({v.objective_id for v in versions.values()})
    for v in versions.values():
        v.objective = objectives[v.objective_id]
    return list(versions.values()), ref


def _cell_rows(suite: Suite, variants: list[str],
               versions: list[ObjectiveVersion]) -> list[CellRow]:
    """Tidy rows keyed by version id (so labels can never collide), suite metrics only."""
    cells = list(Cell.objects.filter(suite=suite.name, suite_version=suite.version,
                                     status__in=Cell.FINISHED, variant__in=variants,
                                     version__in=[v.pk for v in versions])
                 .values_list("id", "version_id", "variant", "seed", "status"))
    metrics: dict[int, dict[str, float]] = {}
    for cell_id, name, value in Metric.objects.filter(
            cell_id__in=[c[0] for c in cells],
            name__in=[m.name for m in suite.metrics]).values_list("cell_id", "name", "value"):
        metrics.setdefault(cell_id, {})[name] = value
    return [CellRow(str(vid), variant, seed, status, metrics.get(cid, {}))
            for cid, vid, variant, seed, status in cells]


def _build_variant_table(suite: Suite, variant: str) -> dict:
    versions, ref = _table_versions(suite)
    headline = suite.metric(suite.headline)
    secondary = tuple(m.name for m in suite.metrics if m.name != headline.name)
    labels = storage.version_labels(versions)
    return {**_suite_meta(suite), "variant": variant,
            "variant_description": suite.variant(variant).description,
            "reference": labels[ref.pk] if ref else suite.reference,
            "metrics": [headline.name, *secondary],
            "rows": _tables(suite, [variant], versions, ref, labels).get(variant, [])}


def _tables(suite: Suite, variants: list[str], versions: list[ObjectiveVersion],
            ref: ObjectiveVersion | None, labels: dict[int, str]) -> dict[str, list[dict]]:
    """Row payloads per variant for ``versions`` (harness.report.variant_tables)."""
    headline = suite.metric(suite.headline)
    secondary = tuple(m.name for m in suite.metrics if m.name != headline.name)
    rows = _cell_rows(suite, variants, versions)
    tables = variant_tables(rows, headline=headline.name,
                            higher_is_better=headline.higher_is_better,
                            reference=str(ref.pk) if ref else "", secondary=secondary)
    by_id = {v.pk: v for v in versions}
    values: dict[tuple[str, str], dict[int, float]] = {}
    for r in rows:
        x = r.metrics.get(headline.name)
        if r.status == "ok" and x is not None and math.isfinite(x):
            values.setdefault((r.variant, r.objective), {})[r.seed] = x
    return {name: [_row_payload(tr, by_id[int(tr.objective)], labels[int(tr.objective)],
                                values.get((name, tr.objective), {}))
                   for tr in table] for name, table in tables.items()}


def _row_payload(tr: TableRow, v: ObjectiveVersion, label: str, values: dict) -> dict:
    s, vs = tr.summary, tr.vs_reference
    return {
        "objective": label, "slug": v.objective.slug, "version_id": v.pk,
        "is_builtin": v.objective.is_builtin, "seeds": tr.seeds, "diverged": tr.diverged,
        "failed": tr.failed, "mean": s.mean, "std": s.std, "ci_low": s.ci_low,
        "ci_high": s.ci_high, "iqm": s.iqm, "secondary": dict(tr.secondary),
        "values": {int(k): float(x) for k, x in sorted(values.items())},
        "vs_reference": None if vs is None else {
            "prob_improvement": vs.prob_improvement, "prob_ci_low": vs.prob_ci_low,
            "prob_ci_high": vs.prob_ci_high, "mean_diff": vs.mean_diff,
            "diff_ci_low": vs.diff_ci_low, "diff_ci_high": vs.diff_ci_high,
            "distinguishable": bool(vs.distinguishable), "n_pairs": vs.n_pairs},
        "tied_with_best": bool(tr.tied_with_best), "is_reference": bool(tr.is_reference),
    }


def _headline_values(suite: Suite, versions: Iterable[ObjectiveVersion | int],
                     variants: list[str]) -> dict[int, dict[str, dict[int, float]]]:
    """{version id: {variant: {seed: headline}}} of ok cells, one query."""
    out: dict[int, dict[str, dict[int, float]]] = {}
    rows = Metric.objects.filter(
        name=suite.headline, cell__suite=suite.name, cell__suite_version=suite.version,
        cell__status=Cell.OK, cell__variant__in=variants,
        cell__version__in=[v if isinstance(v, int) else v.pk for v in versions],
    ).values_list("cell__version_id", "cell__variant", "cell__seed", "value")
    for vid, variant, seed, value in rows:
        if math.isfinite(value):
            out.setdefault(vid, {}).setdefault(variant, {})[seed] = value
    return out


def anchors(suite: Suite) -> tuple[float, float] | None:
    """(score → 0, score → 1) of the suite's headline, fixed per suite version."""
    declared = getattr(suite, "anchors", None) or {}
    if suite.headline in declared:
        return tuple(declared[suite.headline])
    base = suite.version.split("+")[0]
    fixed = ANCHORS.get((suite.name, base), {})
    if suite.headline in fixed:
        return fixed[suite.headline]
    spec = suite.metric(suite.headline)
    if spec.percent:  # a share: 0 and 1 are fixed whatever is submitted
        return (0.0, 1.0) if spec.higher_is_better else (1.0, 0.0)
    return None


def _build_summary(suite: Suite) -> dict:
    versions, ref = _table_versions(suite)
    defaults = suite.default_variants
    headline = suite.metric(suite.headline)
    values = _headline_values(suite, versions, defaults)
    counts: dict[int, dict[str, int]] = {}
    for vid, status, n in (Cell.objects.filter(
            suite=suite.name, suite_version=suite.version, status__in=Cell.FINISHED,
            variant__in=defaults, version__in=[v.pk for v in versions])
            .values_list("version_id", "status").order_by().annotate(n=Count("id"))):
        counts.setdefault(vid, {})[status] = n
    lo_hi = anchors(suite)
    labels = storage.version_labels(versions)
    ref_values = values.get(ref.pk, {}) if ref else {}
    rows = []
    for v in versions:
        mine = values.get(v.pk, {})
        covered = [x for x in defaults if mine.get(x)]
        means = {x: float(np.mean(list(mine[x].values()))) for x in covered}
        by_variant = ({x: (m - lo_hi[0]) / (lo_hi[1] - lo_hi[0]) for x, m in means.items()}
                      if lo_hi else {})
        c = counts.get(v.pk, {})
        row = {
            "objective": labels[v.pk], "label": v.label, "name": v.objective.name,
            "slug": v.objective.slug, "version_id": v.pk, "is_builtin": v.objective.is_builtin,
            "is_reference": ref is not None and v.pk == ref.pk,
            "variants_covered": len(covered), "variants_total": len(defaults),
            "complete": len(covered) == len(defaults) and bool(defaults),
            "diverged": c.get(Cell.DIVERGED, 0),
            "failed": sum(n for s, n in c.items() if s not in (Cell.OK, Cell.DIVERGED)),
            "mean": float(np.mean(list(means.values()))) if means else None,
            "normalized": float(np.mean(list(by_variant.values()))) if by_variant else None,
            "by_variant": by_variant,
            **_relative(mine, ref_values, covered, headline.higher_is_better,
                        is_reference=ref is not None and v.pk == ref.pk),
        }
        rows.append(row)
    rows.sort(key=lambda r: (r["normalized"] is None, -(r["normalized"] or 0), r["objective"]))
    return {**_suite_meta(suite), "reference": labels.get(ref.pk) if ref else None,
            "variants": defaults, "anchors": list(lo_hi) if lo_hi else None, "rows": rows}


def _relative(mine: dict[str, dict[int, float]], ref: dict[str, dict[int, float]],
              covered: list[str], higher: bool, *, is_reference: bool) -> dict:
    """Headline minus reference, averaged over variants, CI over paired seeds."""
    empty = {"delta": None, "delta_ci_low": None, "delta_ci_high": None, "delta_seeds": 0,
             "delta_variants": 0, "distinguishable": False, "better": None}
    both = [x for x in covered if ref.get(x)]
    if not both:
        return empty
    if is_reference:
        return {**empty, "delta": 0.0, "delta_ci_low": 0.0, "delta_ci_high": 0.0,
                "delta_variants": len(both), "better": None}
    seeds = set.intersection(*(set(mine[x]) & set(ref[x]) for x in both))
    per_seed = [float(np.mean([mine[x][s] - ref[x][s] for x in both])) for s in sorted(seeds)]
    if per_seed:
        summary = stats.summarize(per_seed)
        delta, lo, hi = summary.mean, summary.ci_low, summary.ci_high
    else:  # no seed has both on every variant: a point estimate without an interval
        delta = float(np.mean([np.mean(list(mine[x].values())) - np.mean(list(ref[x].values()))
                               for x in both]))
        lo = hi = math.nan
    distinguishable = bool(math.isfinite(lo) and (lo > 0 or hi < 0))
    good = delta > 0 if higher else delta < 0
    return {"delta": delta, "delta_ci_low": lo, "delta_ci_high": hi,
            "delta_seeds": len(per_seed), "delta_variants": len(both),
            "distinguishable": distinguishable,
            "better": (good if distinguishable else None)}


def _build_series(suite: Suite, rows: list[dict] | None = None) -> dict:
    """Family-plot points {label: {variant: [mean, ci_low, ci_high]}} computed directly
    from per-seed values with ``stats.summarize`` (the numbers of the variant tables),
    for ``rows`` (dicts with version_id, objective, slug, is_builtin, is_reference) or
    for every objective version of the suite."""
    axis = variant_axis(suite)
    if axis is None:
        return {"axis": None, "series": {}}
    if rows is None:
        versions, ref = _table_versions(suite)
        labels = storage.version_labels(versions)
        rows = [{"version_id": v.pk, "objective": labels[v.pk], "slug": v.objective.slug,
                 "is_builtin": v.objective.is_builtin,
                 "is_reference": ref is not None and v.pk == ref.pk} for v in versions]
    names = list(dict.fromkeys(v for f in axis["families"] for v in f["variants"]))
    values = _headline_values(suite, [r["version_id"] for r in rows], names)
    series: dict[str, dict] = {}
    for r in rows:
        points = {}
        for name in names:
            x = values.get(r["version_id"], {}).get(name)
            if x:
                summary = stats.summarize(list(x.values()))
                points[name] = [summary.mean, summary.ci_low, summary.ci_high]
        if points:
            series[r["objective"]] = {"slug": r["slug"], "is_builtin": r["is_builtin"],
                                      "is_reference": r["is_reference"], "points": points}
    return {"axis": axis, "series": series}


def _build_profile(obj: Objective, suites: list[Suite],
                   fps: dict[tuple[str, str], str]) -> dict:
    """Per suite, the objective's rows of every variant table it is in, computed from the
    rows of the objective, the reference and each variant's best only (ties and the
    comparison with the reference need no other row; ranks need only the means), so a
    profile never waits for every variant table of the suite."""
    done: dict[tuple[str, str], set[str]] = {}
    for suite_name, version, variant in (Cell.objects.filter(
            version__objective=obj, status__in=Cell.FINISHED)
            .values_list("suite", "suite_version", "variant").distinct()):
        done.setdefault((suite_name, version), set()).add(variant)
    out = []
    for suite in suites:
        variants = [v.name for v in suite.variants if v.name in done.get(
            (suite.name, suite.version), ())]
        if not variants:
            continue
        versions, ref = _table_versions(suite)
        labels = storage.version_labels(versions)
        own = [v for v in versions if v.objective_id == obj.pk]
        sign = 1 if suite.metric(suite.headline).higher_is_better else -1
        means = {vid: {name: float(np.mean(list(seeds.values())))
                       for name, seeds in per.items()}
                 for vid, per in _headline_values(suite, versions, variants).items()}
        entered = dict(Cell.objects.filter(
            suite=suite.name, suite_version=suite.version, status__in=Cell.FINISHED,
            variant__in=variants, version__in=[v.pk for v in versions])
            .values_list("variant").order_by().annotate(n=Count("version", distinct=True)))
        keep = {v.pk for v in own} | ({ref.pk} if ref else set())
        for name in variants:
            scored = [(sign * m[name], vid) for vid, m in means.items() if name in m]
            if scored:
                keep.add(max(scored)[1])
        tables = _tables(suite, variants, [v for v in versions if v.pk in keep], ref, labels)
        summary = _summaries([(suite, fps.get((suite.name, suite.version), _EMPTY))])
        rows, series = [], {}
        for name in variants:
            for r in tables.get(name, []):
                mine = r["slug"] == obj.slug
                if mine:
                    better = sum(1 for m in means.values() if name in m and r["mean"] is not
                                 None and sign * m[name] > sign * r["mean"])
                    rank = better + 1 if r["seeds"] else entered.get(name, 0)
                    rows.append({"variant": name, "rank": rank, "of": entered.get(name, 0),
                                 **r})
                if (mine or r["is_reference"]) and r["seeds"]:
                    s = series.setdefault(r["objective"], {
                        "slug": r["slug"], "is_builtin": r["is_builtin"],
                        "is_reference": r["is_reference"] and not mine, "points": {}})
                    s["points"][name] = [r["mean"], r["ci_low"], r["ci_high"]]
        headline = suite.metric(suite.headline)
        out.append({**_suite_meta(suite), "reference": summary[suite.name]["reference"],
                    "metrics": [headline.name, *(m.name for m in suite.metrics
                                                 if m.name != headline.name)],
                    "variants": variants, "rows": rows,
                    "summary": [r for r in summary[suite.name]["rows"] if r["slug"] == obj.slug],
                    "series": {"axis": variant_axis(suite), "series": series},
                    "scatter": _scatter(suite, obj, variants)})
    return {"suites": out}


def _scatter(suite: Suite, obj: Objective, variants: list[str]) -> list[dict]:
    """Per-seed (x, y) metric pairs of this objective and the reference, per variant."""
    declared = getattr(suite, "scatter_plots", None) or SCATTERS.get(suite.name, ())
    names = {m.name for m in suite.metrics}
    plots = []
    for spec in declared:
        x, y = spec["x"], spec["y"]
        if x not in names or y not in names:
            continue
        points: dict[tuple[str, str, int, int], dict[str, float]] = {}
        ref_slug = suite.reference
        for slug, label, variant, seed, name, value in Metric.objects.filter(
                name__in=[x, y], cell__suite=suite.name, cell__suite_version=suite.version,
                cell__status=Cell.OK, cell__variant__in=variants,
                cell__version__objective__slug__in=[obj.slug, ref_slug],
        ).values_list("cell__version__objective__slug", "cell__version__label",
                      "cell__variant", "cell__seed", "name", "value"):
            points.setdefault((slug, label, variant, seed), {})[name] = value
        series: dict[str, dict] = {}
        for (slug, label, variant, seed), m in sorted(points.items()):
            if x in m and y in m:
                s = series.setdefault(label, {"label": label, "is_reference": slug == ref_slug
                                              and slug != obj.slug, "x": [], "y": [], "text": []})
                s["x"].append(m[x])
                s["y"].append(m[y])
                s["text"].append(f"{variant} seed {seed}")
        if series:
            plots.append({"x": x, "y": y, "x_label": suite.metric(x).label,
                          "y_label": suite.metric(y).label, "series": list(series.values())})
    return plots


def _profile_curves(obj: Objective, suites: list[Suite], numbers: dict,
                    fps: dict[tuple[str, str], str],
                    wanted: str | Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """{suite: {variant: curves}} for the requested variants, cached per (objective,
    suite, variant) with the suite's and the objective's own cell fingerprints."""
    own = {(a["suite"], a["suite_version"], a["variant"]):
           _fingerprint(a["n"], a["top"], a["last"])
           for a in Cell.objects.filter(version__objective=obj, status__in=Cell.FINISHED)
           .values("suite", "suite_version", "variant").order_by()
           .annotate(n=Count("id"), top=Max("id"), last=Max("finished_at"))}
    by_name = {s.name: s for s in suites}
    items, where = [], []
    for entry in numbers["suites"]:
        suite = by_name[entry["suite"]]
        if wanted == "all":
            variants = entry["variants"]
        else:
            choice = wanted.get(suite.name) if isinstance(wanted, Mapping) else None
            variants = [choice if choice in entry["variants"] else entry["variants"][0]]
        for variant in variants:
            fp = _combine([fps.get((suite.name, suite.version), _EMPTY),
                           own.get((suite.name, suite.version, variant), _EMPTY)])
            key = f"curves:{PAYLOAD_VERSION}:{obj.pk}:{suite.name}:{suite.version}:{variant}"
            items.append((key, fp, (lambda s=suite, v=variant: _build_curves(obj, s, v))))
            where.append((suite.name, variant))
    out: dict[str, dict[str, Any]] = {}
    for (suite_name, variant), payload in zip(where, _cached(items), strict=True):
        out.setdefault(suite_name, {})[variant] = payload
    return out


def _build_curves(obj: Objective, suite: Suite, variant: str) -> dict:
    versions, ref = _table_versions(suite)
    chosen = [v for v in versions if v.objective_id == obj.pk]
    labels = storage.version_labels(versions)
    ids = {v.pk for v in chosen}
    if ref is not None and ref.pk not in ids:
        ids.add(ref.pk)
    raw: dict[int, dict[str, dict[int, list[float]]]] = {}
    diverged: dict[int, set[int]] = {}
    for vid, seed, status, name, values in Curve.objects.filter(
            cell__suite=suite.name, cell__suite_version=suite.version, cell__variant=variant,
            cell__status__in=Cell.FINISHED, cell__version__in=ids,
    ).values_list("cell__version_id", "cell__seed", "cell__status", "name", "values"):
        raw.setdefault(vid, {}).setdefault(name, {})[seed] = values
        if status == Cell.DIVERGED:
            diverged.setdefault(vid, set()).add(seed)
    by_label = {}
    for vid, curves in raw.items():
        is_ref = ref is not None and vid == ref.pk and vid not in {v.pk for v in chosen}
        by_label[labels[vid]] = {
            "is_reference": is_ref, "diverged": sorted(diverged.get(vid, ())),
            "curves": {name: _band(seeds, keep_seeds=not is_ref)
                       for name, seeds in sorted(curves.items())}}
    return {"variant": variant, "by_label": by_label}


def _band(seeds: dict[int, list[float]], *, keep_seeds: bool) -> dict:
    """Mean and ±1 s.d. over the seeds that reached each step (non-finite steps skipped)."""
    length = max((len(v) for v in seeds.values()), default=0)
    grid = np.full((len(seeds), length), np.nan)
    for i, values in enumerate(seeds.values()):
        row = np.asarray([np.nan if x is None else x for x in values], dtype=float)
        grid[i, :len(row)] = np.where(np.isfinite(row), row, np.nan)
    n = np.sum(np.isfinite(grid), axis=0)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # steps no seed (or one) reached
        mean = np.nanmean(grid, axis=0)
        sd = np.where(n > 1, np.nanstd(grid, axis=0, ddof=1), np.nan)
    out = {"mean": _round(mean), "low": _round(mean - sd), "high": _round(mean + sd),
           "n": [int(k) for k in n]}
    if keep_seeds:
        out["seeds"] = {int(s): _round(np.asarray([np.nan if x is None else x for x in v],
                                                   dtype=float))
                        for s, v in sorted(seeds.items())}
    return out


def _build_compare(suite: Suite, a: ObjectiveVersion, b: ObjectiveVersion) -> dict:
    headline = suite.metric(suite.headline)
    variants = [v.name for v in suite.variants]
    values = _headline_values(suite, [a, b], variants)
    va, vb = values.get(a.pk, {}), values.get(b.pk, {})
    rows = []
    for name in variants:
        x, y = va.get(name, {}), vb.get(name, {})
        if not x and not y:
            continue
        common = sorted(set(x) & set(y))
        diff = None
        if common:
            c = stats.compare_paired([x[s] for s in common], [y[s] for s in common],
                                     higher_is_better=headline.higher_is_better)
            diff = {f: getattr(c, f) for f in c.__dataclass_fields__}
        rows.append({"variant": name, "default": suite.variant(name).default,
                     "a": _summary_dict(x), "b": _summary_dict(y), "n_pairs": len(common),
                     "diff": diff, "pairs": [[s, x[s], y[s]] for s in common]})
    covered = [r["variant"] for r in rows if r["default"] and r["n_pairs"]]
    overall = _relative(va, vb, covered, headline.higher_is_better, is_reference=False)
    return {**_suite_meta(suite),
            "a": _version_meta(a), "b": _version_meta(b), "rows": rows,
            "overall": {**overall, "variants": covered}}


def _summary_dict(values: dict[int, float]) -> dict:
    s = stats.summarize(list(values.values()))
    return {"seeds": s.n, "mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high,
            "std": s.std}


def _version_meta(v: ObjectiveVersion) -> dict:
    return {"slug": v.objective.slug, "name": v.objective.name, "label": v.label,
            "version_id": v.pk, "is_builtin": v.objective.is_builtin}


def _primary_version(slug: str, suite: Suite) -> ObjectiveVersion:
    """The objective's version at its defaults (label = name) with finished cells in the
    suite, else its newest such version."""
    versions = list(ObjectiveVersion.objects.select_related("objective").filter(
        objective__slug=slug, cells__suite=suite.name, cells__suite_version=suite.version,
        cells__status__in=Cell.FINISHED).distinct().order_by("-created", "-id"))
    if not versions:
        if not Objective.objects.filter(slug=slug).exists():
            raise NotFound(f"no objective {slug!r}")
        raise NotFound(f"{slug!r} has no results in {suite.name}")
    return next((v for v in versions if v.label == v.objective.name), versions[0])


# --- small helpers ----------------------------------------------------------------------

def _suite(suite: Suite | str) -> Suite:
    if isinstance(suite, Suite):
        return suite
    try:
        return get_suite(suite)
    except KeyError:
        raise NotFound(f"no suite {suite!r} (suites: {', '.join(suite_names())})") from None


def _variant(suite: Suite, name: str):
    try:
        return suite.variant(name)
    except KeyError:
        raise NotFound(f"suite {suite.name!r} has no variant {name!r}") from None


def _suite_meta(suite: Suite) -> dict:
    headline = suite.metric(suite.headline)
    return {"suite": suite.name, "suite_version": suite.version,
            "description": suite.description, "headline": headline.name,
            "headline_label": headline.label, "headline_short": headline.short or headline.name,
            "higher_is_better": headline.higher_is_better,
            "percent": headline.percent,
            "metric_specs": [{"name": m.name, "label": m.label, "short": m.short or m.name,
                              "percent": m.percent, "higher_is_better": m.higher_is_better,
                              "description": m.description} for m in suite.metrics]}


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _round(a: np.ndarray) -> list[float | None]:
    return [float(f"{x:.6g}") if math.isfinite(x) else None for x in np.asarray(a, float)]


def _jsonable(value: Any) -> Any:
    """NaN/inf → None, numpy scalars → Python, tuples → lists (valid strict JSON)."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str | int) else str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
