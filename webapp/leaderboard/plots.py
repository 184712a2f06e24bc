"""Plot data for the pages, shaped from the suite's declarations (:mod:`harness.report.figures`
builds each plot's plotly figure from it, for the pages and for notebooks): every value
stays in its metric's unit and every axis is labelled by what the suite declared
(``Suite.curves``, ``scatters``, ``reliability``, ``variant_axis``).

- strip: per-seed headline values of a variant's objectives;
- family: the headline across a family of variants (same config but the declared numeric
  key: noise rate, ε), mean with a CI band;
- curves: each stored per-seed curve against its own x axis (epochs, an ε grid, …), mean
  with a ±1 s.d. band;
- scatter: per-seed pairs of two metrics;
- reliability: a reliability diagram from three per-seed curves over confidence bins;
- heatmap: objectives × the metrics of ``Suite.heatmap``, the mean over seeds in one variant.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from harness.contract.suite import Suite, is_number
from harness.storage import store
from harness.storage.models import Cell, Curve, Metric, Objective
from webapp.leaderboard import cache
from webapp.leaderboard.boards import table_versions
from webapp.leaderboard.lookup import rounded, suite_of
from webapp.leaderboard.pieces import headline_pieces
from webapp.leaderboard.state import SuiteState, state_of

# --- the headline across variants -------------------------------------------------------


def variant_axis(suite: Suite) -> dict | None:
    """How variants line up on the suite's declared axis: {"x_key", "x_label", "families":
    [{"name", "variants", "x", "default"}]}; None without a declared axis.

    Families are variants with equal config apart from the x key; an x = 0 variant whose
    config differs from a family's in exactly one other key (``clean`` vs ``symmetric``)
    is that family's x = 0 point. Families need two points.
    """
    declared = suite.variant_axis
    if declared is None:
        return None
    key = declared.key
    points = [v for v in suite.variants if is_number(v.config.get(key))]
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
    label = declared.label + (f" ({declared.unit})" if declared.unit else "")
    return {"x_key": key, "x_label": label, "families": families}


def family_series(suite: Suite | str) -> dict:
    """Headline mean and CI per objective across the variants of each family, cached."""
    state = state_of(suite_of(suite))
    return cache.cached([(cache.key("series", state.suite.name, state.suite.version),
                          state.fingerprint, lambda: build_series(state))])[0]


def build_series(state: SuiteState, rows: list[dict] | None = None) -> dict:
    """Family-plot points {label: {variant: [mean, ci_low, ci_high]}}: ``stats.summarize``
    of the per-seed values (the numbers of the variant tables), taken from the variants'
    cached headline pieces, for ``rows`` (dicts with version_id, objective, slug,
    is_builtin, is_reference) or for every objective version of the suite."""
    suite = state.suite
    axis = variant_axis(suite)
    if axis is None:
        return {"axis": None, "series": {}}
    names = list(dict.fromkeys(v for f in axis["families"] for v in f["variants"]))
    pieces = headline_pieces(state, names)  # resolves the table versions
    if rows is None:
        versions, ref = state.versions, state.ref
        labels = store.version_labels(versions)
        rows = [{"version_id": v.pk, "objective": labels[v.pk], "slug": v.objective.slug,
                 "is_builtin": v.objective.is_builtin,
                 "is_reference": ref is not None and v.pk == ref.pk} for v in versions]
    series: dict[str, dict] = {}
    for r in rows:
        points = {}
        for name in names:
            point = pieces[name].points.get(r["version_id"])
            if point is not None:
                points[name] = point
        if points:
            series[r["objective"]] = {"slug": r["slug"], "is_builtin": r["is_builtin"],
                                      "is_reference": r["is_reference"], "points": points}
    return {"axis": axis, "series": series}


# Lines a family plot shows before the reader clicks the legend (the rest are listed).
FAMILY_SHOWN = 8


def family_plot(series: dict, labels: Iterable[str], *, metric: str, spec: dict) -> dict:
    """Line-plot data per variant family: per objective, the family's every x with the mean
    and CI band, None where the objective did not run that variant (the line breaks there,
    it never joins the variants either side).

    Lines are ordered by the objective's mean rank over the family's variants it ran (ties:
    more variants first), chosen across the family, not on one variant. ``shown``: the
    reference, the :data:`FAMILY_SHOWN` best, and the best on any variant of the family;
    the others start hidden in the legend.
    """
    axis = series.get("axis")
    if not axis:
        return {"families": []}
    higher = spec.get("better", "higher") != "lower"
    labels = [x for x in labels if x in series["series"]]
    families = []
    for fam in axis["families"]:
        points = {label: [series["series"][label]["points"].get(v) for v in fam["variants"]]
                  for label in labels}
        points = {k: [p if p is not None and p[0] is not None else None for p in pts]
                  for k, pts in points.items() if any(p is not None and p[0] is not None
                                                      for p in pts)}
        ranks, best = _family_ranks(points, len(fam["variants"]), higher)
        order = sorted(points, key=lambda k: (ranks[k], -sum(p is not None for p in points[k]),
                                              k))
        lines = []
        for i, label in enumerate(order):
            s, pts = series["series"][label], points[label]
            lines.append({
                "label": label, "is_reference": s["is_reference"],
                "shown": s["is_reference"] or i < FAMILY_SHOWN or label in best,
                "mean_rank": ranks[label], "x": list(fam["x"]),
                "mean": [p[0] if p else None for p in pts],
                "low": [p[1] if p else None for p in pts],
                "high": [p[2] if p else None for p in pts]})
        if lines:
            families.append({"name": fam["name"], "x_label": axis["x_label"],
                             "variants": list(fam["variants"]), "lines": lines})
    return {"metric": metric, "spec": spec, "families": families, "shown": FAMILY_SHOWN}


def _family_ranks(points: dict[str, list], n: int, higher: bool) -> tuple[dict, set]:
    """Each objective's mean rank (1 = best; ties share the mean of their places) over the
    variants it ran, and the objectives best on at least one variant."""
    import scipy.stats  # here: a second to import, which the CLI's commands need not pay

    ranks: dict[str, list[float]] = {k: [] for k in points}
    best: set[str] = set()
    for j in range(n):
        ran = [(k, pts[j][0]) for k, pts in points.items() if pts[j] is not None]
        if not ran:
            continue
        means = np.array([m for _, m in ran], dtype=float)
        places = scipy.stats.rankdata(-means if higher else means)  # ties: average places
        for (k, _), place in zip(ran, places, strict=True):
            ranks[k].append(float(place))
            if place == places.min():
                best.add(k)
    return {k: float(np.mean(r)) for k, r in ranks.items()}, best


def strip_plot(table: dict, rows: list[dict]) -> dict:
    """Per-seed headline values of ``rows`` (best first) for a strip/box plot."""
    return {"metric": table["headline_label"], "spec": table["headline_spec"],
            "variant": table["variant"],
            "objectives": [{"label": r["objective"], "values": list(r["values"].values()),
                            "seeds": [int(k) for k in r["values"]],
                            "is_reference": r["is_reference"],
                            "tied_with_best": r["tied_with_best"]} for r in rows if r["seeds"]]}


def heatmap(suite: Suite, rows: list[dict], table: dict) -> dict | None:
    """Objectives × metrics of the suite's declared heatmap: for each of ``rows`` (the
    page's visible rows, in table order) the mean over its ok seeds of each metric in
    ``table`` (the drawn variant's table, whose rows carry the headline mean and every
    other metric's mean), in the metric's stored unit; None where it has no value, and no
    plot without a declaration or a value."""
    spec = suite.heatmap
    if spec is None:
        return None
    by_version = {r["version_id"]: r for r in table["rows"]}
    z = []
    for r in rows:
        drawn = by_version.get(r["version_id"])
        values = []
        for m in spec.metrics:
            x = None
            if drawn is not None and drawn["seeds"]:
                x = drawn["mean"] if m == suite.headline else drawn["secondary"].get(m)
            values.append(x if is_number(x) else None)
        z.append(values)
    if not any(x is not None for values in z for x in values):
        return None
    specs = [suite.metric(m).to_json() for m in spec.metrics]
    return {"label": spec.label, "variant": table["variant"], "spec": specs[0],
            "metrics": specs, "columns": [m["short"] for m in specs],
            "objectives": [r["objective"] for r in rows],
            "is_reference": [r["is_reference"] for r in rows], "z": z}


# --- per-seed metric pairs and the reliability diagram ----------------------------------


def scatter(suite: Suite, obj: Objective, variants: list[str]) -> list[dict]:
    """Per-seed (x, y) metric pairs of this objective and the reference, per declared plot."""
    plots = []
    for spec in suite.scatters:
        x, y = spec.x, spec.y
        points: dict[tuple[str, str, str, int], dict[str, float]] = {}
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
                          "y_label": suite.metric(y).label,
                          "x_spec": suite.metric(x).to_json(), "y_spec": suite.metric(y).to_json(),
                          "series": list(series.values())})
    return plots


def reliability(suite: Suite, curves: dict) -> dict | None:
    """A reliability diagram of one variant's curves payload (:func:`build_curves`): per
    version label, per confidence bin, the mean over seeds of the bin's confidence and
    accuracy, and the samples in it summed over seeds."""
    spec = suite.reliability
    if spec is None or not curves:
        return None
    out = []
    for label, entry in curves.get("by_label", {}).items():
        c = entry["curves"]
        if not all(n in c for n in (spec.confidence, spec.accuracy, spec.count)):
            continue
        conf, acc = c[spec.confidence], c[spec.accuracy]
        out.append({"label": label, "is_reference": entry["is_reference"],
                    "confidence": conf["mean"], "accuracy": acc["mean"],
                    "seeds": {seed: {"confidence": values,
                                     "accuracy": acc.get("seeds", {}).get(seed, [])}
                              for seed, values in conf.get("seeds", {}).items()},
                    "count": [None if m is None else m * n for m, n in zip(
                        c[spec.count]["mean"], c[spec.count]["n"], strict=True)]})
    if not out:
        return None
    return {"label": spec.label, "variant": curves.get("variant"), "series": out}


# --- per-seed curves --------------------------------------------------------------------


def profile_curves(obj: Objective, suites: list[Suite], numbers: dict,
                   fps: dict[tuple[str, str], str],
                   wanted: str | Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """{suite: {variant: curves}} for the requested variants, cached per (objective,
    suite, variant) with the suite's and the objective's own cell fingerprints."""
    own = {(a["suite"], a["suite_version"], a["variant"]): cache.fingerprint(a["n"], a["c"])
           for a in cache.tallies("suite", "suite_version", "variant",
                                  version_id__in=obj.versions.values("pk"))}
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
            fp = cache.combine([fps.get((suite.name, suite.version), cache.EMPTY),
                                own.get((suite.name, suite.version, variant), cache.EMPTY)])
            key = cache.key("curves", obj.pk, suite.name, suite.version, variant)
            items.append((key, fp, (lambda s=suite, v=variant: build_curves(obj, s, v))))
            where.append((suite.name, variant))
    out: dict[str, dict[str, Any]] = {}
    for (suite_name, variant), payload in zip(where, cache.cached(items), strict=True):
        out.setdefault(suite_name, {})[variant] = payload
    return out


def build_curves(obj: Objective, suite: Suite, variant: str) -> dict:
    """Per version label and declared curve: mean with a ±1 s.d. band over seeds at each
    point, every seed's values (of drawn curves, not the reference's), and the curve's x
    values: 1…n of its axis, or the stored curve it names (an ε grid). ``specs`` lists the
    curves to draw, in the suite's order; the others hold x values or a reliability
    diagram's bins."""
    versions, ref = table_versions(suite)
    chosen = [v for v in versions if v.objective_id == obj.pk]
    labels = store.version_labels(versions)
    ids = {v.pk for v in chosen}
    if ref is not None and ref.pk not in ids:
        ids.add(ref.pk)
    declared = {c.name: c for c in suite.curves}
    raw: dict[int, dict[str, dict[int, list[float]]]] = {}
    diverged: dict[int, set[int]] = {}
    for vid, seed, status, name, values in Curve.objects.filter(
            cell__suite=suite.name, cell__suite_version=suite.version, cell__variant=variant,
            cell__status__in=Cell.FINISHED, cell__version__in=ids, name__in=list(declared),
    ).values_list("cell__version_id", "cell__seed", "cell__status", "name", "values"):
        raw.setdefault(vid, {}).setdefault(name, {})[seed] = values
        if status == Cell.DIVERGED:
            diverged.setdefault(vid, set()).add(seed)
    bins = {suite.reliability.confidence, suite.reliability.accuracy} if suite.reliability \
        else set()
    by_label = {}
    for vid, curves in raw.items():
        is_ref = ref is not None and vid == ref.pk and vid not in {v.pk for v in chosen}
        payload = {}
        for name, seeds in sorted(curves.items()):
            spec = declared[name]  # a reliability diagram toggles each seed too
            band = _band(seeds, keep_seeds=not is_ref and (spec.drawn or name in bins))
            grid = curves.get(spec.x_values, {}) if spec.x_values else {}
            band["x"] = (_band(grid, keep_seeds=False)["mean"] if grid
                         else list(range(1, len(band["mean"]) + 1)))
            payload[name] = band
        by_label[labels[vid]] = {"is_reference": is_ref,
                                 "diverged": sorted(diverged.get(vid, ())), "curves": payload}
    # A list, not a mapping: the declared order survives JSON storage (jsonb sorts keys).
    return {"variant": variant, "specs": [c.to_json() for c in suite.curves if c.drawn],
            "by_label": by_label}


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
    out = {"mean": rounded(mean), "low": rounded(mean - sd), "high": rounded(mean + sd),
           "n": [int(k) for k in n]}
    if keep_seeds:
        out["seeds"] = {int(s): rounded(np.asarray([np.nan if x is None else x for x in v],
                                                   dtype=float))
                        for s, v in sorted(seeds.items())}
    return out
