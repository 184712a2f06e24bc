"""Page bodies rendered once per change of what they show, kept beside the payloads.

Rendering a suite page's tables and figures costs more than reading its numbers (at 200
objectives, about 120 ms of a 160 ms request), and it is the same for every visitor. So
the body of the suite, home and objective pages (everything but the site header, which
names the user) is rendered once per fingerprint of what it shows and stored in the
table cache (:mod:`webapp.leaderboard.cache`), shared by every web process. Keys carry a
hash of the templates and template tags as well as the leaderboard code, so a deploy
that changes how a page looks renders afresh.

After cells land (:data:`harness.storage.store.cells_landed`, sent once their transaction
committed), :func:`refresh` builds again, in the writer's process, what of that suite was
built most recently: at most ``HARNESS_REFRESH_PAGES`` (default 4; 0 turns it off) suite
bodies, API pages of tables, home bodies and objective bodies, so the next visitor of a
page people are reading finds it fresh instead of paying for the rebuild. Nothing depends
on it: whatever is stale is rebuilt by whoever asks first.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Max, QuerySet
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from harness.contract import heldout
from harness.contract.registry import all_suites, get_suite, suite_names
from harness.contract.suite import Suite
from harness.storage.models import FactorialCell, Objective, TableCache, Upload
from webapp import leaderboard
from webapp.leaderboard import cache
from webapp.leaderboard.boards import table_page_json, tables_json_key
from webapp.leaderboard.factorial import variance_sources
from webapp.leaderboard.held_out_column import held_out_columns
from webapp.leaderboard.lookup import with_values
from webapp.leaderboard.state import state_of

log = logging.getLogger(__name__)

SHOW_CHOICES = ("15", "30", "all")
SUITE_BODY = "webapp/includes/suite_body.html"
HOME_BODY = "webapp/includes/home_body.html"
OBJECTIVE_BODY = "webapp/includes/objective_body.html"


def _templates_version() -> str:
    here = Path(__file__).parent
    files = sorted([*(here / "templates").rglob("*.html"), *(here / "templatetags").glob("*.py"),
                    Path(__file__), here.parent / "harness" / "report" / "figures.py",
                    here.parent / "harness" / "report" / "tuning_figures.py"])
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:10]


TEMPLATES_VERSION = _templates_version()


def _key(page: str, *parts: object) -> str:
    return cache.key("body", TEMPLATES_VERSION, page, *parts)


def suite_body(name: str, variant: str | None = None, *, kind: str = "all",
               show: str = "15", track: str | None = None) -> tuple[dict, SafeString]:
    """The suite page's body for (variant, kind, show, track) and what the page's title
    needs. Raises :class:`~webapp.leaderboard.NotFound` for an unknown suite, variant, kind
    or track."""
    show = show if show in SHOW_CHOICES else "15"
    view = leaderboard.suite_view(name, variant, kind=kind, track=track,
                                  limit=None if show == "all" else int(show))
    suite = view.state.suite
    key = _key("suite", suite.name, suite.version, view.variant, kind, show)
    parts = [view.fingerprint, _factorial_fingerprint(suite),
             heldout.fingerprint() if heldout.available() else "-"]
    if suite.track != "defaults":  # the tuning gain reads the defaults' cells too
        parts.append(state_of(get_suite(suite.name)).fingerprint)
    body = cache.cached([(key, cache.combine(parts), lambda: {
        "args": [suite.name, view.variant, kind, show, track or ""],
        "html": render_to_string(SUITE_BODY, _suite_context(view, show))})])[0]
    return {"suite": {"suite": suite.name}, "variant": view.variant}, mark_safe(body["html"])


def home_body(suite: str | None = None, kind: str = "all",
              track: str | None = None) -> SafeString:
    """The home page's body (the ranked table and its filters), on the defaults' track or
    (``track="tuned"``) the tuned one."""
    view = leaderboard.home_view(suite=suite, kind=kind, track=track)
    tuned = track == "tuned"
    key = _key("home", suite or "", kind, "tuned" if tuned else "")
    body = cache.cached([(key, view.fingerprint, lambda: {
        "args": [suite, kind, track or ""],
        "html": render_to_string(HOME_BODY, {
            "board": view.payload(), "kinds": leaderboard.KINDS, "tuned": tuned,
            "suite_choices": [s.name for s in all_suites() if s.tuning is not None]
            if tuned else suite_names(),
            "filter_hidden": [("track", "tuned")] if tuned else [],
            "tunable": [s.name for s in all_suites() if s.tuning is not None]})})])[0]
    return mark_safe(body["html"])


def objective_body(slug: str, viewer=None, *, curves: dict[str, str] | None = None,
                   track: str | None = None) -> tuple[str, SafeString]:
    """The objective page's body (``curves``: {suite: variant} the curve panels show, by
    default each suite's first variant; ``track``: defaults or tuned) and its title. Only
    the default curves' body is stored: whether the viewer may read the code is part of its
    key; nothing else about the viewer is on the body."""
    # only a suite's own variants (any other value shows its first variant anyway): one
    # body per real choice, and a key of bounded length whatever the query string holds
    curves = {name: v for name, v in (curves or {}).items() if name in suite_names()
              and v in {x.name for x in get_suite(name).variants}}
    view = leaderboard.objective_view(slug, viewer, curves=curves, track=track)
    tuned = view.track != "defaults"
    if curves:  # choices multiply (variants of one suite × another's...): rendered as asked,
        # from cached numbers, but only the default body is kept
        return view.obj.name, mark_safe(render_to_string(OBJECTIVE_BODY,
                                                         _objective_context(view)))
    key = _key("objective", view.obj.pk, view.code_visible, *(["tuned"] if tuned else []))
    parts = [view.fingerprint, _uploads_fingerprint()]
    if tuned:  # the tuning gain reads the defaults' cells too
        parts += [state_of(get_suite(s.suite.name)).fingerprint for s in view.states]
    body = cache.cached([(key, cache.combine(parts), lambda: {
        "args": [slug, view.code_visible, *(["tuned"] if tuned else [])],
        "html": render_to_string(OBJECTIVE_BODY, _objective_context(view))})])[0]
    return view.obj.name, mark_safe(body["html"])


def _objective_context(view: leaderboard.ObjectiveView) -> dict:
    profile = view.payload()
    for s in profile["suites"]:
        s["family"] = leaderboard.family_plot(
            s["series"], list(s["series"]["series"]), metric=s["headline_label"],
            spec=s["headline_spec"])
        s["secondary"] = with_values(s["table_specs"], s["rows"])
        s["curve_variant"] = next(iter(s["curves"]), None)
        s["multi_label"] = len({r["objective"] for r in s["rows"]}) > 1
    if view.track != "defaults":
        by_name = {st.suite.name: st.suite for st in view.states}
        for s in profile["suites"]:
            suite = by_name[s["suite"]]
            s["tuning"] = _objective_tuning(suite, view.versions, s["variants"])
            s["tuning_k"] = suite.tuning.k
    return {"o": profile, "tuned": view.track != "defaults",
            "tunable": [s.name for s in all_suites() if s.tuning is not None],
            "others": [o for o in leaderboard.objective_choices()
                       if o["slug"] != view.obj.slug]}


def _objective_tuning(suite: Suite, versions: list, variants: list[str]) -> list[dict]:
    """The objective page's tuned track: per variant and version, defaults against tuned,
    the tuning gain and the trial chosen (the suite page's tuning table, this objective's
    rows)."""
    from webapp.leaderboard.tuning import tuning_report

    report = tuning_report(suite, versions, variants)
    return [{**r, "variant": v, "chosen_text": chosen_text(r["chosen"])}
            for v in variants for r in report.get(v, [])]


def chosen_text(chosen: dict | None) -> str:
    """A trial's settings and hyperparameters as one line (``lr=0.0131, q=0.7``)."""
    chosen = chosen or {}
    return ", ".join(f"{n}={v:.3g}" if isinstance(v, float) else f"{n}={v}"
                     for n, v in {**chosen.get("settings", {}),
                                  **chosen.get("hyperparameters", {})}.items())


def _uploads_fingerprint() -> str:
    """Which objectives are listed (the compare menu) also moves when an upload is checked."""
    return _rows_fingerprint(Upload.objects.all(), "checked")


def _rows_fingerprint(rows: QuerySet, stamp: str) -> str:
    """``count:max(id):max(stamp)`` of ``rows``, one aggregate: the signal of a small table
    the cell tallies do not cover (rows added, deleted, or written again)."""
    a = rows.aggregate(n=Count("id"), top=Max("id"), last=Max(stamp))
    return f"{a['n']}:{a['top']}:{a['last'].isoformat() if a['last'] else '-'}"


def _suite_context(view: leaderboard.SuiteView, show: str) -> dict:
    page = view.payload()
    suite, table = view.state.suite, page["table"]
    return {**page, "rows": table["rows"], "kind": view.kind, "show": show,
            "kinds": leaderboard.KINDS, "show_choices": SHOW_CHOICES,
            "hidden": page["total_rows"] - len(table["rows"]),
            "filter_hidden": [("variant", page["variant"])] + (
                [("track", "tuned")] if view.state.suite.track != "defaults" else []),
            "secondary": with_values(table["table_specs"], table["rows"]),
            "min_seeds": suite.min_seeds, "variance": variance_sources(suite, view.variant),
            "held_out": held_out_columns(suite, page["across"]["rows"]),
            "track_query": "&track=tuned" if suite.track != "defaults" else "",
            "tuning": _tuning_section(suite, view.variant, table)}


def _tuning_section(suite: Suite, variant: str, table: dict) -> dict | None:
    """On the tuned track: the chosen trials, the tuning gain and the two plots."""
    if suite.track == "defaults":
        return None
    from harness.storage.models import ObjectiveVersion
    from webapp.leaderboard.tuning import figure_payloads, tuning_report

    versions = list(ObjectiveVersion.objects.filter(
        id__in=[r["version_id"] for r in table["rows"]]).select_related("objective"))
    rows = tuning_report(suite, versions, [variant])[variant]
    if not rows:
        return None
    order = {r["version_id"]: i for i, r in enumerate(table["rows"])}
    labels = {v.label: order.get(v.id, len(order)) for v in versions}
    rows.sort(key=lambda r: labels.get(r["objective"], len(order)))
    budgets = [n for n in (1, 2, 4, 8, 16, 32) if n <= suite.tuning.k]
    for r in rows:
        curve = (r["budget"] or {}).get("mean") or []
        r["best_at"] = [curve[n - 1] if n <= len(curve) else None for n in budgets]
        r["chosen_text"] = chosen_text(r["chosen"])
    plots = figure_payloads(suite, rows, table["reference"])
    for i, s in enumerate(plots["sensitivity"]):
        s["id"] = f"sensitivity-data-{i}"
    metric = suite.tuning.metric or suite.headline
    return {"rows": rows, "k": suite.tuning.k, "selection": suite.tuning.selection,
            "validation": suite.tuning.validation_text,
            "metric": metric, "metric_spec": suite.metric(metric).to_json(),
            "budgets": budgets, "plots": plots}


def _factorial_fingerprint(suite: Suite) -> str:
    """Factorial cells are not in the cell tallies: the variance section's own signal,
    public objectives only, as the section shows."""
    return _rows_fingerprint(FactorialCell.objects.filter(
        suite=suite.name, suite_version=suite.version,
        version__objective__visibility=Objective.PUBLIC), "finished_at")


# --- after a landing --------------------------------------------------------------------


def refresh(suite: Suite, limit: int | None = None) -> int:
    """Bring up to date the ``limit`` (default ``HARNESS_REFRESH_PAGES``) most recently
    built suite bodies of ``suite``, and as many of its API pages of tables, home bodies
    and objective bodies; how many were looked at.
    Never raises: a body that cannot be built now is left to its next reader."""
    limit = settings.HARNESS_REFRESH_PAGES if limit is None else limit
    if limit <= 0:
        return 0
    suites = _key("suite", suite.name, suite.version) + ":"
    tables = tables_json_key(suite) + ":"
    jobs = [(lambda a: suite_body(a[0], a[1], kind=a[2], show=a[3],
                                  track=a[4] if len(a) > 4 else None), _recent(suites, limit)),
            (lambda a: table_page_json(suite, a), _recent(tables, limit)),
            (lambda a: home_body(a[0], a[1], a[2] if len(a) > 2 else None),
             _recent(_key("home") + ":", limit)),
            (_objective_again, _recent(_key("objective") + ":", limit))]
    done = 0
    for build, recent in jobs:
        for args in recent:
            try:
                build(args)
                done += 1
            except Exception:
                log.exception("refreshing a page body after a landing failed: %s", args)
    return done


def _objective_again(args: list) -> None:
    """An objective body as it was built: with the code shown, as its owner sees it."""
    slug, code_visible, *track = args
    obj = Objective.objects.select_related("owner").get(slug=slug)
    viewer = obj.owner if code_visible and obj.visibility != Objective.PUBLIC else None
    objective_body(slug, viewer, track=track[0] if track else None)


def _recent(prefix: str, limit: int) -> list[list]:
    """The arguments of the ``limit`` most recently stored bodies under ``prefix``."""
    return [args for (args,) in TableCache.objects.filter(key__startswith=prefix)
            .order_by("-updated").values_list("payload__args")[:limit]]


def on_landing(sender, *, suite: Suite, **_) -> None:
    """Receiver of :data:`harness.storage.store.cells_landed`."""
    try:
        refresh(suite)
    except Exception:  # the cells are stored; a page refresh must never fail the writer
        log.exception("refreshing pages after a landing in %s failed", suite)
