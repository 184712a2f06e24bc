"""The one place results and cell states are written and read (through the Django ORM).

Writes are idempotent on the cell key (version, suite, suite version, variant,
seed): storing a cell twice leaves one row, and a cell's metrics and curves land
in the same transaction as its status, so an interrupted run leaves no partial cell.

A worker runs a cell only while it holds it: :func:`claim` turns queued cells (or
running cells whose worker stopped sending heartbeats) into running ones and returns a
*claim*, ``{cell id: attempt}``. Every later write of that worker (heartbeat, result,
release) is fenced by the claim: it applies only while the cell is still running under
the same attempt number. Another claim always increments ``attempts``, so a worker
that lost its cell (the reaper gave it to someone else) can no longer write it, and a
cell is stored once however often its message is delivered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.dispatch import Signal
from django.utils import timezone
from django.utils.text import slugify

from harness.contract.suite import CellResult, Suite
from harness.objectives.loading import LoadedObjective
from harness.report.jsonsafe import finite_or_none
from harness.report.tables import CellRow
from harness.report.textsafe import storable
from harness.storage.models import (
    Cell,
    Curve,
    FactorialCell,
    Metric,
    Objective,
    ObjectiveVersion,
    Upload,
)


def slug_for(name: str) -> str:
    """The slug an objective named ``name`` is stored under."""
    return slugify(name.replace("_", "-")) or "objective"


def version_for(objective: LoadedObjective, *, owner=None) -> ObjectiveVersion:
    """The stored version of (code, hyperparameters), created on first use."""
    slug = slug_for(objective.name)
    obj, _ = Objective.objects.get_or_create(
        slug=slug,
        defaults={"name": objective.name, "description": objective.description,
                  "is_builtin": objective.origin == "builtin", "owner": owner})
    version, _ = ObjectiveVersion.objects.get_or_create(
        objective=obj, key=objective.version_key,
        defaults={"code": objective.source, "code_sha256": objective.code_sha256,
                  "hyperparameters": dict(objective.hyperparameters),
                  "label": objective.label})
    return version


def metrics_and_curves(cell_ids: Iterable[int]) -> tuple[dict[int, dict[str, float]],
                                                         dict[int, dict[str, list]]]:
    """({cell id: {metric: value}}, {cell id: {curve: values}}), one query each."""
    ids = list(cell_ids)
    curves: dict[int, dict[str, list]] = {}
    for cell_id, name, values in Curve.objects.filter(cell_id__in=ids).values_list(
            "cell_id", "name", "values"):
        curves.setdefault(cell_id, {})[name] = values
    return metrics_of(ids), curves


def metrics_of(cell_ids: Iterable[int]) -> dict[int, dict[str, float]]:
    """{cell id: {metric: value}} (metrics in name order), one query."""
    metrics: dict[int, dict[str, float]] = {}
    for cell_id, name, value in Metric.objects.filter(cell_id__in=list(cell_ids)).order_by(
            "cell_id", "name").values_list("cell_id", "name", "value"):
        metrics.setdefault(cell_id, {})[name] = value
    return metrics


def held_out_cells() -> Q:
    """Cells of held-out variants (``Suite.held_out``): in no public answer, since their
    draws are the server's secret; the leaderboard shows only their means."""
    from harness.contract.registry import all_suites

    q = Q(pk__in=[])
    for suite in all_suites():
        for v in suite.held_out:
            q |= Q(suite=suite.name, variant=v.name)
    return q


def finished_cells(version: ObjectiveVersion, suite: Suite, variants: Iterable[str],
                   seeds: Iterable[int]) -> set[tuple[str, int]]:
    """(variant, seed) pairs already stored with a final status, from the draws this process
    makes (the variant's hash names a held-out secret and a draws key): a cell drawn under
    another is not this run's result, and running it again replaces it."""
    hashes = {v: suite.variant(v).config_hash(suite) for v in variants}
    rows = Cell.objects.filter(version=version, suite=suite.name, suite_version=suite.version,
                               variant__in=list(hashes), seed__in=list(seeds),
                               status__in=Cell.FINISHED)
    return {(v, s) for v, s, h in rows.values_list("variant", "seed", "variant_hash")
            if h == hashes[v]}


@transaction.atomic
def store_factorial(version: ObjectiveVersion, suite: Suite, results: Iterable[CellResult],
                    environment: dict) -> int:
    """Store the cells of a factorial run (their seeds are ``harness.contract.seeding`` factorial
    seeds) apart from the replicates; a rerun replaces a cell. Returns the count stored."""
    from harness.contract.seeding import factors

    results = list(results)
    _check_declared(suite, results)
    now = timezone.now()
    for r in results:
        levels = factors(r.seed)
        if levels is None:
            raise ValueError(f"seed {r.seed} is not a factorial seed")
        FactorialCell.objects.update_or_create(
            version=version, suite=suite.name, suite_version=suite.version, variant=r.variant,
            init=levels[0], order=levels[1], noise=levels[2],
            defaults={"variant_hash": suite.variant(r.variant).config_hash(suite),
                      "status": r.status, "wall_time": r.wall_time, "finished_at": now,
                      "environment": {**environment, **r.info},
                      "metrics": {k: v for k, v in r.metrics.items() if math.isfinite(v)}})
    return len(results)


def finished_factorial(version: ObjectiveVersion, suite: Suite, variants: Iterable[str],
                       seeds: Iterable[int]) -> set[tuple[str, int]]:
    """(variant, factorial seed) pairs of a factorial run already stored."""
    from harness.contract.seeding import factorial_seed

    rows = FactorialCell.objects.filter(version=version, suite=suite.name,
                                        suite_version=suite.version, variant__in=list(variants))
    stored = {(v, factorial_seed(i, j, k))
              for v, i, j, k in rows.values_list("variant", "init", "order", "noise")}
    return {(v, s) for v, s in stored if s in set(seeds)}


def factorial_scores(suite: Suite, variant: str, metric: str, *,
                     versions: Iterable[ObjectiveVersion] | None = None,
                     public: bool = False) -> dict[ObjectiveVersion, dict[tuple, float | None]]:
    """Per objective version with factorial cells on ``variant``: {(init, order, noise):
    the metric's value, None where the cell did not finish ok}. ``public``: objectives
    anyone may see only."""
    rows = FactorialCell.objects.filter(suite=suite.name, suite_version=suite.version,
                                        variant=variant).select_related("version__objective")
    if versions is not None:
        rows = rows.filter(version__in=list(versions))
    if public:
        rows = rows.filter(version__objective__visibility=Objective.PUBLIC)
    out: dict[ObjectiveVersion, dict[tuple, float | None]] = {}
    for cell in rows.order_by("version_id", "init", "order", "noise"):
        value = cell.metrics.get(metric) if cell.status == Cell.OK else None
        out.setdefault(cell.version, {})[(cell.init, cell.order, cell.noise)] = value
    return out


# Stored output is already truncated by the sandbox; this only bounds a row's size.
MAX_CAPTURED_CHARS = 100_000

# Sent once the transaction that stored finished cells committed (``suite``, ``version``,
# ``variants``): the web app renders again the pages people read (webapp/rendered.py).
cells_landed = Signal()

Claim = dict[int, int]  # cell id -> the attempt number under which this worker holds it


@transaction.atomic
def store_results(version: ObjectiveVersion, suite: Suite, results: Iterable[CellResult],
                  environment: dict, *, claim: Mapping[int, int] | None = None) -> int:
    """Store finished cells; an existing cell with the same key is replaced, never duplicated.

    Without ``claim`` (the CLI), every result is stored and counts one attempt. With the
    claim a worker got from :func:`claim`, a result is stored only into a cell this claim
    still holds (the claim's attempt is counted already); others are skipped. Returns the
    number of cells stored.
    """
    # one order for every writer: the cell-tally triggers lock a row per (variant, version),
    # and two transactions taking the same rows in opposite orders could deadlock
    results = sorted(results, key=lambda r: (r.variant, r.seed))
    _check_declared(suite, results)
    count = 0
    now = timezone.now()
    for r in results:
        variant = suite.variant(r.variant)
        key = dict(version=version, suite=suite.name, suite_version=suite.version,
                   variant=r.variant, seed=r.seed)
        if claim is None:
            cell, _ = Cell.objects.select_for_update().get_or_create(
                **key, defaults={"variant_hash": variant.config_hash(suite)})
            cell.attempts += 1
        else:
            cell = Cell.objects.select_for_update().filter(**key).first()
            if cell is None or cell.pk not in claim or not Cell.objects.filter(
                    pk=cell.pk, status=Cell.RUNNING, attempts=claim[cell.pk]).update(
                    status=r.status):  # compare-and-set: the claim still holds the cell
                continue  # finished already, or another worker's now: never stored twice
        cell.variant_hash = variant.config_hash(suite)
        cell.status = r.status
        cell.error = storable(r.error)
        cell.reason = r.reason if r.status not in (Cell.OK, Cell.DIVERGED) else ""
        cell.captured = storable((r.captured or "")[:MAX_CAPTURED_CHARS])
        cell.diverged_step = r.diverged_step
        cell.finished_at = now
        cell.wall_time = r.wall_time
        cell.environment = {**environment, **r.info}
        cell.save()
        cell.metrics.all().delete()
        cell.curves.all().delete()
        # A non-finite metric is no result (SQLite cannot even store it); curves keep their
        # length with null where a value was not finite (JSON has no NaN).
        Metric.objects.bulk_create(Metric(cell=cell, name=k, value=v)
                                   for k, v in r.metrics.items() if math.isfinite(v))
        Curve.objects.bulk_create(Curve(cell=cell, name=k, values=finite_or_none(list(v)))
                                  for k, v in r.curves.items())
        count += 1
    if count:
        variants = sorted({r.variant for r in results})
        transaction.on_commit(lambda: cells_landed.send(
            sender=Cell, suite=suite, version=version, variants=variants))
    return count


def _check_declared(suite: Suite, results: list[CellResult]) -> None:
    """Every metric and curve a result holds is one the suite declares: a judge that
    computes something its suite forgot to declare fails loudly, before anything is
    written (the pages, tables and exports only know declared ones)."""
    metrics = {m.name for m in suite.metrics}
    curves = {c.name: c for c in suite.curves}
    for r in results:
        suite.variant(r.variant)
        for name in r.metrics:
            if name not in metrics:
                raise ValueError(f"suite {suite.name!r}: undeclared metric {name!r} in a "
                                 f"result (declare it in Suite.metrics)")
        for name, values in r.curves.items():
            if name not in curves:
                raise ValueError(f"suite {suite.name!r}: undeclared curve {name!r} in a "
                                 f"result (declare it in Suite.curves)")
            ticks = curves[name].x.ticks  # named points: a value per name, no more
            if ticks and r.status == "ok" and len(values) != len(ticks):
                raise ValueError(f"suite {suite.name!r}: curve {name!r} has {len(values)} "
                                 f"points for the {len(ticks)} named on its axis "
                                 f"({', '.join(ticks)})")


# --- the cell lifecycle ------------------------------------------------------------------


def held(claim: Mapping[int, int]) -> Q:
    """Running cells still held under ``claim`` (cell id → attempt)."""
    q = Q(pk__in=[])
    for pk, attempt in claim.items():
        q |= Q(pk=int(pk), attempts=int(attempt))
    return q & Q(status=Cell.RUNNING)


def stale_before() -> datetime:
    """Running cells whose last heartbeat is older than this have lost their worker."""
    return timezone.now() - timedelta(seconds=settings.HARNESS_HEARTBEAT_TIMEOUT)


def _stale() -> Q:
    cutoff = stale_before()
    return Q(status=Cell.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(
        heartbeat_at__isnull=True, started_at__lt=cutoff) | Q(
        heartbeat_at__isnull=True, started_at__isnull=True))


def _gave_up(cell: Cell) -> str:
    return (f"gave up after {cell.attempts} attempts: the worker running this cell was lost "
            f"each time (last: {cell.worker or 'unknown'})")


@transaction.atomic
def claim(cell_ids: Iterable[int], *, worker: str,
          held_claim: Mapping[int, int] | None = None) -> Claim:
    """Take the cells that no live worker holds: queued ones, running ones whose heartbeat
    is stale, and those ``held_claim`` (a retry's own earlier claim) still holds.

    A taken cell becomes running under ``worker`` with a fresh heartbeat. A new claim counts
    an attempt (and is the new fence); retaking one's own held cell keeps the attempt. A
    cell that already used ``HARNESS_MAX_ATTEMPTS`` fails with reason ``infrastructure``
    instead of running again. Cells locked by a concurrent claim are skipped, not waited for.
    """
    held_claim = {int(k): int(v) for k, v in (held_claim or {}).items()}
    ids = list(cell_ids)
    takeable = Q(status=Cell.QUEUED) | _stale()
    if held_claim:
        takeable |= held(held_claim)
    now = timezone.now()
    taken: Claim = {}
    for cell in (Cell.objects.select_for_update(skip_locked=True)
                 .filter(pk__in=ids).filter(takeable).order_by("pk")):
        seen = Q(pk=cell.pk, status=cell.status, attempts=cell.attempts)  # compare-and-set
        if cell.status == Cell.RUNNING and held_claim.get(cell.pk) == cell.attempts:
            changes = {}  # a retry resuming its own claim: the same attempt
        elif cell.attempts >= settings.HARNESS_MAX_ATTEMPTS:
            Cell.objects.filter(seen).update(
                status=Cell.FAILED, reason="infrastructure", error=_gave_up(cell),
                finished_at=now)
            continue
        else:
            changes = {"attempts": cell.attempts + 1, "started_at": now}
        if Cell.objects.filter(seen).update(
                status=Cell.RUNNING, worker=worker[:200], heartbeat_at=now, finished_at=None,
                error="", reason="", captured="", progress=None, **changes):
            taken[cell.pk] = changes.get("attempts", cell.attempts)
    return taken


def heartbeat(claim: Mapping[int, int], progress: float | None = None) -> int:
    """Refresh the heartbeat of the cells the claim still holds (and their group's
    ``progress``, 0–1, when known); how many it holds."""
    if not claim:
        return 0
    changes = {} if progress is None else {"progress": min(max(float(progress), 0.0), 1.0)}
    return Cell.objects.filter(held(claim)).update(heartbeat_at=timezone.now(), **changes)


def finish(cells: Q, status: str, reason: str, error: str) -> int:
    """End held cells without a result (timeouts, infrastructure failures)."""
    now = timezone.now()
    return Cell.objects.filter(cells).update(status=status, reason=reason, error=storable(error),
                                             finished_at=now, heartbeat_at=now)


@transaction.atomic
def release(cells: Q) -> list[int]:
    """Give running cells back to the queue (a lost worker, a stale heartbeat), keeping their
    attempts; a cell out of attempts fails with reason ``infrastructure`` instead. Returns
    the ids of the cells queued again."""
    now = timezone.now()
    queued = []
    for cell in Cell.objects.select_for_update(skip_locked=True).filter(
            cells, status=Cell.RUNNING):
        seen = Q(pk=cell.pk, status=Cell.RUNNING, attempts=cell.attempts)  # compare-and-set
        if cell.attempts >= settings.HARNESS_MAX_ATTEMPTS:
            Cell.objects.filter(seen).update(
                status=Cell.FAILED, reason="infrastructure", error=_gave_up(cell),
                finished_at=now)
        elif Cell.objects.filter(seen).update(status=Cell.QUEUED, worker="", heartbeat_at=None,
                                              enqueued_at=None):
            queued.append(cell.pk)
    return queued


def release_stale() -> list[int]:
    """The reaper's first half: running cells whose worker stopped beating go back to the
    queue (or fail, out of attempts). Returns the ids queued again."""
    return release(_stale())


def cell_rows(suite: Suite, variants: Iterable[str] | None = None,
              versions: Iterable[ObjectiveVersion] | None = None) -> list[CellRow]:
    """Tidy rows (objective label, variant, seed, status, metrics) for the suite's version."""
    cells = Cell.objects.filter(suite=suite.name, suite_version=suite.version,
                                status__in=Cell.FINISHED)
    if variants is not None:
        cells = cells.filter(variant__in=list(variants))
    if versions is not None:
        cells = cells.filter(version__in=list(versions))
    cells = cells.select_related("version")
    metrics: dict[int, dict[str, float]] = {}
    for cell_id, name, value in Metric.objects.filter(cell__in=cells).values_list(
            "cell_id", "name", "value"):
        metrics.setdefault(cell_id, {})[name] = value
    labels = version_labels({c.version for c in cells})
    return [CellRow(labels[c.version_id], c.variant, c.seed, c.status, metrics.get(c.id, {}),
                    _track(c.environment)) for c in cells]


def _track(environment: object) -> str:
    track = environment.get("track") if isinstance(environment, dict) else None
    return track if isinstance(track, str) else ""


def reference_version(suite: Suite) -> ObjectiveVersion | None:
    """The newest stored version of the suite's reference objective at its defaults."""
    return (ObjectiveVersion.objects.filter(objective__slug=suite.reference,
                                            label=suite.reference)
            .order_by("-created").first())


def version_labels(versions: Iterable[ObjectiveVersion]) -> dict[int, str]:
    """Display labels by version id, with a short code hash where two versions share a label."""
    versions = list(versions)
    seen: dict[str, int] = {}
    for v in versions:
        seen[v.label] = seen.get(v.label, 0) + 1
    return {v.id: v.label if seen[v.label] == 1 else f"{v.label}@{v.code_sha256[:7]}"
            for v in versions}


def latest_versions(suite: Suite) -> list[ObjectiveVersion]:
    """Per (objective, label), the newest version with a result in this suite version: a
    cell that trained (ok or diverged). A version whose cells all failed, timed out or were
    killed is on no public table (its owner sees why on the run page). Nor is a version of
    uploaded results until an upload of it is verified (:func:`unverified_uploads`), nor
    one of an objective staff hid (:func:`hidden_objectives`)."""
    # EXISTS probes each version's cells through the unique (version, suite, ...) index: a
    # few ms at 100k cells, where a join with DISTINCT scanned them all (~0.3 s)
    trained = Cell.objects.filter(version=OuterRef("pk"), suite=suite.name,
                                  suite_version=suite.version,
                                  status__in=(Cell.OK, Cell.DIVERGED))
    versions = (ObjectiveVersion.objects.filter(Exists(trained))
                .exclude(pk__in=unverified_uploads())
                .exclude(objective__in=hidden_objectives())
                .order_by("objective_id", "label", "-created", "-id"))
    newest: dict[tuple[int, str], ObjectiveVersion] = {}
    for v in versions:
        newest.setdefault((v.objective_id, v.label), v)
    return list(newest.values())



def unverified_uploads():
    """Ids of versions that have uploaded results but no verified upload (a queryset): the
    sample the server ran for them is no public result on its own."""
    return (ObjectiveVersion.objects.filter(uploads__isnull=False)
            .exclude(uploads__status=Upload.VERIFIED).values("pk"))


def hidden_objectives():
    """Ids of objectives staff hid from every board, export and list (a queryset)."""
    return Objective.objects.filter(hidden_at__isnull=False).values("pk")


def unlisted_objectives(viewer=None):
    """Ids of objectives whose every version is an upload not yet verified, or that staff
    hid (a queryset), less those ``viewer`` owns: only their owner sees them, on any page
    or in the API."""
    hidden = unverified_uploads()
    out = (Objective.objects.filter(versions__pk__in=hidden)
           .exclude(versions__in=ObjectiveVersion.objects.exclude(pk__in=hidden))
           | Objective.objects.filter(pk__in=hidden_objectives()))
    if viewer is not None and getattr(viewer, "is_authenticated", False):
        out = out.exclude(owner_id=viewer.pk)
    return out.values("pk")


def verified_versions(version_ids: Iterable[int]) -> set[int]:
    """Those of ``version_ids`` whose results include a verified upload."""
    return set(Upload.objects.filter(version_id__in=list(version_ids), status=Upload.VERIFIED)
               .values_list("version_id", flat=True))
