"""Run a submission's queued cells, off the request.

``enqueue(submission)`` is the one seam between the web app and whatever executes
cells. ``settings.HARNESS_RUNNER`` selects the executor:

- ``"thread"`` (default): one daemon worker thread per process takes submission ids
  from a queue and runs them, so the request that queued them returns at once;
- ``"inline"``: run synchronously inside ``enqueue`` (tests that want results now);
- ``"none"``: leave the cells queued for an external worker;
- ``"package.module:function"``: any callable taking the submission (the Celery
  issue points this at a task's ``delay``, views unchanged).

Whatever the executor, the work is :func:`run_submission`: claim the submission's
queued cells (queued → running, so two workers never run the same cell), group them
by suite and seeds so the suite still seed-batches, load the objective from the
stored code, train, and store through :func:`webapp.storage.store_results`, which
sets each cell's final status. An exception outside the objective's own failures
marks the group failed with a user-safe reason and is logged.

Note: until the sandbox issue lands, objectives run in this process, unsandboxed.
"""

from __future__ import annotations

import importlib
import logging
import queue
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from suites import get_suite
from suites.base import Suite
from webapp.models import Cell, ObjectiveVersion, Submission

log = logging.getLogger(__name__)

INTERNAL_ERROR = ("internal error while running this cell (not caused by the objective); "
                  "it has been logged")


def enqueue(submission: Submission) -> None:
    """Hand ``submission``'s queued cells to the configured executor; never blocks on training."""
    backend = getattr(settings, "HARNESS_RUNNER", "thread")
    if backend == "inline":
        run_submission(submission.pk)
    elif backend == "thread":
        _worker().submit(submission.pk)
    elif backend == "none":
        return
    else:
        _import(backend)(submission)


# --- the work -------------------------------------------------------------------------


def run_submission(submission_id: int) -> None:
    """Run every queued cell of the submission; cells already claimed elsewhere are skipped."""
    submission = Submission.objects.select_related("version").get(pk=submission_id)
    for suite_name, suite_version, cell_ids in _groups(submission):
        claimed = _claim(cell_ids)
        if claimed:
            run_group(submission.version, suite_name, suite_version, claimed)


def run_group(version: ObjectiveVersion, suite_name: str, suite_version: str,
              cells: list[Cell]) -> None:
    """Train one objective version on ``cells`` (claimed, status running) of one suite."""
    from harness.environment import environment
    from webapp import storage

    try:
        suite = suite_at(suite_name, suite_version)
        variants = sorted({c.variant for c in cells})
        seeds = sorted({c.seed for c in cells})
        with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
            objective = load_stored(version, Path(tmp))
            results = suite.run_cells(objective, variants, seeds)
            for r in results:
                r.error = scrub_paths(scrub_paths(r.error, Path(tmp).resolve()), tmp)
        wanted = {(c.variant, c.seed) for c in cells}
        storage.store_results(version, suite, [r for r in results
                                               if (r.variant, r.seed) in wanted],
                              environment("cpu"))
    except Exception as exc:  # the objective's own failures come back as results, not here
        log.exception("cells %s failed outside the objective", [c.pk for c in cells])
        reason = _reason(exc)
        Cell.objects.filter(pk__in=[c.pk for c in cells]).update(
            status=Cell.FAILED, error=reason, finished_at=timezone.now())


def load_stored(version: ObjectiveVersion, directory: Path):
    """The stored code loaded from a private file, with the stored hyperparameters."""
    from harness.objectives.loading import load_objective

    path = directory / code_filename(version.objective.slug)
    path.write_text(version.code, encoding="utf-8")
    return load_objective(str(path), version.hyperparameters)


def suite_at(name: str, version: str) -> Suite:
    """The registry's suite at a stored version, including a shortened ``V+eN`` version."""
    suite = get_suite(name)
    if version == suite.version:
        return suite
    match = re.fullmatch(re.escape(suite.version) + r"\+e(\d+)", version)
    if match is None:
        raise LookupError(f"suite {name} version {version} is no longer available "
                          f"(current version: {suite.version})")
    return suite.shortened(int(match.group(1)))


def code_filename(slug: str) -> str:
    """A module-safe file name for an objective's code: ``my-loss`` → ``my_loss.py``."""
    stem = re.sub(r"\W+", "_", slug).strip("_") or "objective"
    return f"{'_' if stem[0].isdigit() else ''}{stem}.py"


def scrub_paths(text: str, directory: str | Path) -> str:
    """Messages name the user's file, never the server's temporary directory."""
    return text.replace(str(directory).rstrip("/") + "/", "") if text else text


def _groups(submission: Submission) -> list[tuple[str, str, list[int]]]:
    """(suite, suite version, cell ids) per group sharing one seed set, so seeds batch."""
    by_key: dict[tuple[str, str], dict[str, set[int]]] = {}
    ids: dict[tuple[str, str, str], list[int]] = {}
    rows = submission.cells.filter(status=Cell.QUEUED).order_by("suite", "variant", "seed")
    for pk, suite, suite_version, variant, seed in rows.values_list(
            "pk", "suite", "suite_version", "variant", "seed"):
        by_key.setdefault((suite, suite_version), {}).setdefault(variant, set()).add(seed)
        ids.setdefault((suite, suite_version, variant), []).append(pk)
    groups = []
    for (suite, suite_version), variants in by_key.items():
        by_seeds: dict[tuple[int, ...], list[int]] = {}
        for variant, seeds in variants.items():
            by_seeds.setdefault(tuple(sorted(seeds)), []).extend(
                ids[(suite, suite_version, variant)])
        groups += [(suite, suite_version, cell_ids) for cell_ids in by_seeds.values()]
    return groups


def _claim(cell_ids: list[int]) -> list[Cell]:
    """Mark still-queued cells running; cells another worker holds or finished are skipped."""
    with transaction.atomic():
        cells = list(Cell.objects.select_for_update(skip_locked=True)
                     .filter(pk__in=cell_ids, status=Cell.QUEUED))
        now = timezone.now()
        Cell.objects.filter(pk__in=[c.pk for c in cells]).update(
            status=Cell.RUNNING, started_at=now, error="")
    for c in cells:
        c.status, c.started_at = Cell.RUNNING, now
    return cells


def _reason(exc: Exception) -> str:
    from harness.objectives.loading import ObjectiveError

    if isinstance(exc, ObjectiveError):
        return exc.message
    if isinstance(exc, LookupError) and "no longer available" in str(exc):
        return str(exc)
    return INTERNAL_ERROR


def _import(dotted: str) -> Callable[[Submission], None]:
    module, _, name = dotted.partition(":")
    if not name:
        raise ValueError(f"HARNESS_RUNNER must be inline, thread, none or module:function, "
                         f"got {dotted!r}")
    return getattr(importlib.import_module(module), name)


# --- what the run status page shows ------------------------------------------------------

STATUS_LABELS = {Cell.QUEUED: "queued", Cell.RUNNING: "running", Cell.OK: "done",
                 Cell.DIVERGED: "diverged", Cell.FAILED: "failed", Cell.TIMEOUT: "timeout"}
HIDDEN_REASON = {Cell.FAILED: "failed while running (the details are shown to the "
                              "objective's owner only)",
                 Cell.TIMEOUT: "the cell ran past its time limit"}


def run_state(submission: Submission, viewer) -> dict:
    """A submission's cells and counts as plain data (the page and status.json share it).

    Results are public; failure details (tracebacks quoting the code) are the owner's.
    """
    from django.urls import reverse

    from webapp.models import Metric

    owner = viewer.is_authenticated and viewer.pk == submission.owner_id
    cells = list(submission.cells.order_by("suite", "variant", "seed"))
    headlines = {name: _suite_or_none(name) for name in {c.suite for c in cells}}
    values = dict(((cell_id, name), value) for cell_id, name, value in
                  Metric.objects.filter(cell__in=cells, name__in={
                      s.headline for s in headlines.values() if s}).values_list(
                      "cell_id", "name", "value"))
    counts = {label: 0 for label in STATUS_LABELS}
    rows = []
    for c in cells:
        counts[c.status] += 1
        suite = headlines[c.suite]
        value = values.get((c.pk, suite.headline)) if suite else None
        rows.append({
            "id": c.pk, "suite": c.suite, "suite_version": c.suite_version,
            "variant": c.variant, "seed": c.seed, "status": c.status,
            "label": STATUS_LABELS[c.status], "reason": _reason_for(c, owner),
            "headline": None if value is None else {
                "metric": suite.headline, "value": value,
                "text": _metric_text(suite, value)},
            "wall_time": c.wall_time,
        })
    objective = submission.version.objective
    finished = all(c.status in Cell.FINISHED for c in cells)
    return {
        "submission": submission.pk,
        "objective": {"name": objective.name, "slug": objective.slug,
                      "label": submission.version.label,
                      "url": reverse("objective", args=[objective.slug])},
        "is_owner": owner,
        "finished": finished,
        "total": len(cells),
        "counts": counts,
        "suites": [{"name": name, "url": reverse("suite", args=[name])}
                   for name in submission.suites],
        "cells": rows,
    }


def _reason_for(cell: Cell, owner: bool) -> str:
    if cell.status == Cell.DIVERGED:
        step = "" if cell.diverged_step is None else f" at step {cell.diverged_step}"
        return f"non-finite loss{step}"
    if cell.status not in HIDDEN_REASON:
        return ""
    return (cell.error or HIDDEN_REASON[cell.status]) if owner else HIDDEN_REASON[cell.status]


def _metric_text(suite: Suite, value: float) -> str:
    spec = suite.metric(suite.headline)
    return f"{100 * value:.1f}%" if spec.percent else f"{value:.4g}"


def _suite_or_none(name: str) -> Suite | None:
    try:
        return get_suite(name)
    except KeyError:
        return None


# --- the thread executor ----------------------------------------------------------------


class ThreadWorker:
    """One daemon thread running submissions in arrival order."""

    def __init__(self) -> None:
        self.queue: queue.Queue[int] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="harness-runner", daemon=True)
        self.thread.start()

    def submit(self, submission_id: int) -> None:
        self.queue.put(submission_id)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted id is done (tests); False on timeout."""
        done = threading.Event()

        def wait() -> None:
            self.queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout)

    def _loop(self) -> None:
        while True:
            submission_id = self.queue.get()
            try:
                close_old_connections()
                run_submission(submission_id)
            except Exception:
                log.exception("submission %s could not be run", submission_id)
            finally:
                connection.close()  # this thread's connection; never leak it past the run
                self.queue.task_done()


_WORKER: ThreadWorker | None = None
_WORKER_LOCK = threading.Lock()


def _worker() -> ThreadWorker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or not _WORKER.thread.is_alive():
            _WORKER = ThreadWorker()
        return _WORKER


def drain(timeout: float | None = None) -> bool:
    """Wait for the thread executor to finish what it was given (True if idle)."""
    return True if _WORKER is None else _WORKER.drain(timeout)
