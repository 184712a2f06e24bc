"""One objective across suites (its profile) and two objectives side by side (compare)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q

from harness.contract.registry import all_suites
from harness.contract.suite import Suite
from harness.report import stats
from harness.storage import store
from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission
from webapp.leaderboard import cache, plots
from webapp.leaderboard.boards import (
    relative,
    summaries,
    variant_tables_cached,
)
from webapp.leaderboard.crosssuite import profile_table
from webapp.leaderboard.lookup import NotFound, suite_meta, suite_of, suites_on
from webapp.leaderboard.pieces import headline_pieces, headline_values
from webapp.leaderboard.state import SuiteState, states_of


@dataclass
class ObjectiveView:
    """An objective's page as a viewer may see it, resolved cheaply (the objective, its
    versions, one tally query); the numbers are read (or built) by :meth:`payload`."""

    obj: Objective
    versions: list[ObjectiveVersion]
    mine: bool
    states: list[SuiteState]
    curves: str | Mapping[str, str] | None
    track: str = "defaults"

    @property
    def code_visible(self) -> bool:
        return self.obj.visibility == Objective.PUBLIC or self.mine

    @property
    def fingerprint(self) -> str:
        """Changes with any result of any suite and with what the page says about the
        objective and its versions (not with who the viewer is, beyond seeing the code)."""
        o = self.obj
        about = [o.slug, o.name, o.description, o.paper_url, o.visibility, o.is_builtin,
                 str(o.hidden_at), o.hidden_reason,
                 o.owner.get_username() if o.owner else "", self.code_visible,
                 repr(sorted(self.curves.items()) if isinstance(self.curves, Mapping)
                      else self.curves)]
        about += [f"{v.pk}:{v.label}:{v.code_sha256}:{sorted(v.hyperparameters.items())}"
                  for v in self.versions]
        return cache.combine([*(s.fingerprint for s in self.states), *map(str, about)])

    def payload(self) -> dict:
        obj, versions, states = self.obj, self.versions, self.states
        suites = [s.suite for s in states]
        fps = {(s.suite.name, s.suite.version): s.fingerprint for s in states}
        fingerprint = cache.combine(s.fingerprint for s in states)
        key = cache.key("profile", obj.pk, *([] if self.track == "defaults" else [self.track]))
        stored = cache.read([key])
        numbers = cache.cached([(key, fingerprint, lambda: _build_profile(
            obj, states, (stored.get(key) or (None, None))[1]))], stored)[0]
        curve_data: dict[str, dict[str, Any]] = {}
        if self.curves is not None and numbers["suites"]:
            curve_data = plots.profile_curves(obj, suites, numbers, fps, self.curves)
        by_name = {s.name: s for s in suites}
        newest = versions[0] if versions else None
        return {
            "slug": obj.slug, "name": obj.name, "description": obj.description,
            "paper_url": obj.paper_url or None,
            "owner": obj.owner.get_username() if obj.owner else None,
            "is_builtin": obj.is_builtin, "visibility": obj.visibility, "track": self.track,
            # staff hid it: only its owner sees this page, with why
            "hidden": {"at": obj.hidden_at.isoformat(), "reason": obj.hidden_reason}
            if obj.hidden_at else None,
            "created": obj.created.isoformat(), "viewer_is_owner": self.mine,
            "code_visible": self.code_visible,
            "code": newest.code if newest is not None and self.code_visible else None,
            "profile": numbers.get("profile"),
            "versions": [{"id": v.pk, "label": v.label, "hyperparameters": v.hyperparameters,
                          "code_sha256": v.code_sha256, "created": v.created.isoformat()}
                         for v in versions],
            "suites": [{**{k: x for k, x in s.items() if k != "_parts"},
                        "rows": [r for name in s["variants"] for r in s["_parts"][name]["rows"]],
                        "curves": curve_data.get(s["suite"], {}),
                        "reliability": {v: plots.reliability(by_name[s["suite"]], c)
                                        for v, c in curve_data.get(s["suite"], {}).items()}}
                       for s in numbers["suites"]],
        }


def objective_view(slug: str, viewer=None, *, curves: str | Mapping[str, str] | None = "all",
                   track: str | None = None) -> ObjectiveView:
    """The page :func:`objective_profile` would return, not yet read: on the defaults'
    track, or (``track="tuned"``) over the suites' tuned tracks (suites with a tuned
    protocol only). Raises :class:`NotFound` for an unknown objective or track, or an
    objective the viewer may not see."""
    suites = suites_on(track)
    try:
        obj = Objective.objects.select_related("owner").get(slug=slug)
    except Objective.DoesNotExist:
        raise NotFound(f"no objective {slug!r}") from None
    if Objective.objects.filter(pk=obj.pk, pk__in=store.unlisted_objectives(viewer)).exists():
        raise NotFound(f"no objective {slug!r}")  # uploads not verified: the owner's only
    versions = list(obj.versions.order_by("-created", "-id"))
    mine = bool(viewer is not None and getattr(viewer, "is_authenticated", False)
                and obj.owner_id is not None and viewer.pk == obj.owner_id)
    return ObjectiveView(obj, versions, mine, states_of(suites), curves, track or "defaults")


def objective_profile(slug: str, viewer=None, *,
                      curves: str | Mapping[str, str] | None = "all",
                      track: str | None = None) -> dict:
    """An objective's page: metadata, code (only if public or ``viewer`` owns it, else
    None), versions with hyperparameters, every suite's per-variant rows and summary,
    family, scatter and reliability plot data, and per-seed curves.

    ``curves``: "all" (every suite and variant with results), {suite: variant} (those
    only; the objective page shows one variant per suite) or None.
    Curves: per version label and curve name, ``mean`` with a ±1 s.d. band (``low``,
    ``high``) over seeds at each point, its ``x`` values, and every seed's values
    (``seeds``); diverged seeds are truncated at divergence and listed in ``diverged``.
    """
    return objective_view(slug, viewer, curves=curves, track=track).payload()


def _build_profile(obj: Objective, states: list[SuiteState],
                   previous: dict | None = None) -> dict:
    """Per suite, the objective's rows of every variant table it is in: the whole tables'
    rows (the verdicts are Holm-corrected over every objective of a table, so no row can
    be computed from a few others), ranks from the means.

    Each variant's part (its rows with rank, its family-plot points) depends on that
    variant's table and piece alone: with ``previous`` (the stale stored profile), parts
    whose variant fingerprint is unchanged are kept, and only the variants where cells
    landed are read again."""
    done: dict[tuple[str, str], set[str]] = {}
    for suite_name, version, variant in (Cell.objects.filter(
            version__objective=obj, status__in=Cell.FINISHED)
            .values_list("suite", "suite_version", "variant").distinct()):
        done.setdefault((suite_name, version), set()).add(variant)
    before = {s["suite"]: s.get("_parts", {}) for s in (previous or {}).get("suites", [])}
    out = []
    for state in states:
        suite = state.suite
        variants = [v.name for v in suite.variants if v.name in done.get(
            (suite.name, suite.version), ())]
        if not variants:
            continue
        pieces = headline_pieces(state, variants)  # resolves the table versions
        fps = {name: state.variant_fp(name) for name in variants}
        old = before.get(suite.name, {})
        parts = {n: old[n] for n in variants if n in old and old[n]["fp"] == fps[n]}
        todo = [n for n in variants if n not in parts]
        tables = {n: t["rows"] for n, t in variant_tables_cached(state, todo).items()}
        sign = 1 if suite.headline_metric.higher_is_better else -1
        for name in todo:
            means, entered = pieces[name].means, len(pieces[name].entered)
            rows, points = [], []
            for r in tables.get(name, []):
                mine = r["slug"] == obj.slug
                if mine:
                    better = sum(1 for m in means.values() if r["mean"] is not None
                                 and sign * m > sign * r["mean"])
                    rank = better + 1 if r["seeds"] else entered
                    rows.append({"variant": name, "rank": rank, "of": entered, **r})
                if (mine or r["is_reference"]) and r["seeds"]:
                    points.append([r["objective"], {
                        "slug": r["slug"], "is_builtin": r["is_builtin"],
                        "is_reference": r["is_reference"] and not mine},
                        [r["mean"], r["ci_low"], r["ci_high"]]])
            parts[name] = {"fp": fps[name], "rows": rows, "points": points}
        series: dict[str, dict] = {}
        for name in variants:
            for label, meta, point in parts[name]["points"]:
                series.setdefault(label, {**meta, "points": {}})["points"][name] = point
        summary = summaries([state])
        headline = suite.headline_metric
        out.append({**suite_meta(suite), "reference": summary[suite.name]["reference"],
                    "metrics": [headline.name, *(m.name for m in suite.metrics
                                                 if m.name != headline.name)],
                    "variants": variants,  # "rows": read from "_parts" (stored once)
                    "summary": [r for r in summary[suite.name]["rows"] if r["slug"] == obj.slug],
                    "series": {"axis": plots.variant_axis(suite), "series": series},
                    "scatter": plots.scatter(suite, obj, variants),
                    "_parts": parts})
    return {"suites": out, "profile": profile_table(obj.slug, suites=[
        st.suite for st in states if any(x["suite"] == st.suite.name for x in out)])}


def compare(slug_a: str, slug_b: str, suite: Suite | str) -> dict:
    """Two objectives side by side per variant, with paired-seed improvements of a over b
    (positive = a better, whatever the metric's direction) from ``stats.compare_paired``,
    and an overall row over the default variants both have (paired over seeds of the mean
    over variants)."""
    suite = suite_of(suite)
    if slug_a == slug_b:
        raise NotFound("compare two different objectives")
    a, b = _primary_version(slug_a, suite), _primary_version(slug_b, suite)
    fingerprint, _ = cache.suite_fingerprints(suite)
    key = cache.key("compare", suite.name, suite.version, a.pk, b.pk)
    return cache.cached([(key, fingerprint, lambda: _build_compare(suite, a, b))])[0]


def _build_compare(suite: Suite, a: ObjectiveVersion, b: ObjectiveVersion) -> dict:
    headline = suite.headline_metric
    variants = [v.name for v in suite.variants]
    values = headline_values(suite, [a, b], variants)
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
                                     higher_is_better=headline.higher_is_better,
                                     min_seeds=suite.min_seeds)
            diff = {f: getattr(c, f) for f in c.__dataclass_fields__}
        rows.append({"variant": name, "default": suite.variant(name).default,
                     "a": _summary_dict(x), "b": _summary_dict(y), "n_pairs": len(common),
                     "diff": diff, "pairs": [[s, x[s], y[s]] for s in common]})
    covered = [r["variant"] for r in rows if r["default"] and r["n_pairs"]]
    overall = relative(va, vb, covered, headline.higher_is_better, is_reference=False)
    family = _suite_page_verdicts(suite, a, b, rows, overall)
    return {**suite_meta(suite),
            "a": _version_meta(a), "b": _version_meta(b), "rows": rows,
            "overall": {**overall, "variants": covered}, "family": family}


def _suite_page_verdicts(suite: Suite, a: ObjectiveVersion, b: ObjectiveVersion,
                         rows: list[dict], overall: dict) -> int:
    """Against the suite's reference, the verdicts are the suite pages' (the paired t-test
    Holm-corrected over each table's objectives, and over the summary's for the overall
    row), so that both pages say the same of the same pair: how many objectives that
    family holds (the largest), or 1 for a pair without the reference (one comparison,
    uncorrected). Verdicts are rewritten in place."""
    ref = store.reference_version(suite)
    if ref is None or ref.pk not in (a.pk, b.pk) or a.pk == b.pk:
        return 1
    other = b if ref.pk == a.pk else a
    state = states_of([suite])[0]
    tables = variant_tables_cached(state, [r["variant"] for r in rows if r["diff"]])
    family = 1
    for r in rows:
        if not r["diff"]:
            continue
        table = tables[r["variant"]]["rows"]
        mine = next((t for t in table if t["version_id"] == other.pk), None)
        if mine is not None and mine["vs_reference"] is not None:
            r["diff"]["distinguishable"] = mine["vs_reference"]["distinguishable"]
            family = max(family, sum(t["vs_reference"] is not None for t in table))
    summary = summaries([state])[suite.name]["rows"]
    row = next((x for x in summary if x["version_id"] == other.pk), None)
    if row is not None and overall["improvement_variants"] == row["improvement_variants"]:
        overall["distinguishable"] = row["distinguishable"]
        family = max(family, sum(x["p_value"] is not None and math.isfinite(x["p_value"])
                                 for x in summary))
    return family


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


def objective_suites(slug: str) -> list[str]:
    """Names of the suites (current versions) in which the objective has finished cells."""
    done = set(Cell.objects.filter(version__objective__slug=slug, status__in=Cell.FINISHED)
               .values_list("suite", "suite_version").distinct())
    return [s.name for s in all_suites() if (s.name, s.version) in done]


def stored_slug_of(name: str) -> str | None:
    """The slug an objective is stored under when ``name`` is its name rather than its slug
    (``ldr_kl`` for ``ldr-kl``): the address a page or the API should point to; else None."""
    slug = store.slug_for(name)
    return slug if slug != name and Objective.objects.filter(slug=slug).exists() else None


def runs_in_progress(slug: str) -> list[dict]:
    """The objective's submitted runs with cells still queued or running, newest first:
    {"id", "pending", "total"} (run pages are public, like the cells' states)."""
    return list(_pending(Submission.objects.filter(version__objective__slug=slug))
                .values("id", "pending", "total"))


def runs_on_board(limit: int = 10) -> list[dict]:
    """Public objectives' submitted runs with cells still queued or running, newest first
    (the home page lists them under the board: a submission is on the board before its
    first cell lands): {"id", "slug", "name", "pending", "total"}."""
    runs = _pending(Submission.objects.filter(version__objective__visibility=Objective.PUBLIC)
                    .exclude(version__objective__in=store.unlisted_objectives()))
    return list(runs.values("id", "pending", "total", slug=F("version__objective__slug"),
                            name=F("version__objective__name"))[:limit])


def _pending(runs):
    """``runs`` with cells still queued or running, newest first, annotated with how many
    (``pending``) of their cells (``total``)."""
    pending = Count("cells", filter=Q(cells__status__in=(Cell.QUEUED, Cell.RUNNING)))
    return (runs.annotate(pending=pending, total=Count("cells")).filter(pending__gt=0)
            .order_by("-created", "-id"))


def objective_choices() -> list[dict]:
    """Every listed objective with a finished cell: {"slug", "name", "is_builtin"}, by
    name (not one whose results are all unverified uploads)."""
    finished = Cell.objects.filter(version__objective=OuterRef("pk"), status__in=Cell.FINISHED)
    rows = (Objective.objects.filter(Exists(finished))
            .exclude(pk__in=store.unlisted_objectives()).order_by("name", "slug")
            .values("slug", "name", "is_builtin"))
    return list(rows)
