"""The one place results are written and read (through the Django ORM).

Writes are idempotent on the cell key (version, suite, suite version, variant,
seed): storing a cell twice leaves one row, and a cell's metrics and curves land
in the same transaction as its status, so an interrupted run leaves no partial cell.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from harness.objectives.loading import Objective as LoadedObjective
from harness.report import CellRow
from suites.base import CellResult, Suite
from webapp.models import Cell, Curve, Metric, Objective, ObjectiveVersion


def version_for(objective: LoadedObjective, *, owner=None) -> ObjectiveVersion:
    """The stored version of (code, hyperparameters), created on first use."""
    slug = slugify(objective.name.replace("_", "-")) or "objective"
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


def finished_cells(version: ObjectiveVersion, suite: Suite, variants: Iterable[str],
                   seeds: Iterable[int]) -> set[tuple[str, int]]:
    """(variant, seed) pairs already stored with a final status."""
    rows = Cell.objects.filter(version=version, suite=suite.name, suite_version=suite.version,
                               variant__in=list(variants), seed__in=list(seeds),
                               status__in=Cell.FINISHED)
    return set(rows.values_list("variant", "seed"))


@transaction.atomic
def store_results(version: ObjectiveVersion, suite: Suite, results: Iterable[CellResult],
                  environment: dict) -> int:
    """Store finished cells; an existing cell with the same key is replaced, never duplicated."""
    count = 0
    now = timezone.now()
    for r in results:
        variant = suite.variant(r.variant)
        cell, _ = Cell.objects.select_for_update().get_or_create(
            version=version, suite=suite.name, suite_version=suite.version,
            variant=r.variant, seed=r.seed, defaults={"variant_hash": variant.config_hash(suite)})
        cell.variant_hash = variant.config_hash(suite)
        cell.status = r.status
        cell.error = r.error
        cell.diverged_step = r.diverged_step
        cell.attempts += 1
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
        Curve.objects.bulk_create(Curve(cell=cell, name=k, values=_json_safe(v))
                                  for k, v in r.curves.items())
        count += 1
    return count


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
    return [CellRow(labels[c.version_id], c.variant, c.seed, c.status, metrics.get(c.id, {}))
            for c in cells]


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
    """Per (objective, label), the newest version with finished cells in this suite version."""
    versions = (ObjectiveVersion.objects
                .filter(cells__suite=suite.name, cells__suite_version=suite.version,
                        cells__status__in=Cell.FINISHED)
                .distinct().order_by("objective_id", "label", "-created"))
    newest: dict[tuple[int, str], ObjectiveVersion] = {}
    for v in versions:
        newest.setdefault((v.objective_id, v.label), v)
    return list(newest.values())


def _json_safe(values: Iterable[float]) -> list[float | None]:
    return [float(v) if v is not None and math.isfinite(v) else None for v in values]
