"""Run a submission's queued cells, off the request.

``enqueue(submission)`` is the one seam between the web app and whatever executes
cells. ``settings.HARNESS_RUNNER`` selects the executor:

- ``"thread"`` (default): one daemon worker thread per process takes submission ids
  from a queue and runs them, so the request that queued them returns at once;
- ``"inline"``: run synchronously inside ``enqueue`` (tests that want results now);
- ``"none"``: leave the cells queued for an external worker;
- ``"package.module:function"``: any callable taking the submission, e.g.
  ``"tasks.dispatch:enqueue"``, which sends each group to a Celery queue.

Whatever the executor, the work is the same :class:`GroupRun` over one :class:`Group`
(one objective version, suite, variant and several seeds, so the suite seed-batches):
claim the cells (:func:`webapp.storage.claim`), train them with a heartbeat, store
them through :func:`webapp.storage.store_results`, fenced by the claim. Built-in
baselines train in this process; a submitted objective only ever trains through
:func:`harness.sandbox.run_cells_sandboxed`, never here.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.db.models import Q

from suites import get_suite, suite_at  # suite_at: re-exported for tasks/
from suites.base import REASONS, CellResult, Suite
from webapp import storage
from webapp.models import Cell, ObjectiveVersion, Submission

log = logging.getLogger(__name__)

INTERNAL_ERROR = ("internal error while running this cell (not caused by the objective); "
                  "it has been logged")
DB_ERRORS = (OperationalError, InterfaceError)


class InfrastructureError(Exception):
    """A failure outside the objective that may pass (the sandbox could not start, ...):
    the Celery task retries it; the objective's own failures are results, never this."""


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


# --- groups -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Cells trained together: one objective version and suite (version), variants × seeds.

    A Celery task takes one variant's seeds (the unit spread over workers); the thread
    runner batches every variant that shares the seeds into one run.
    """

    version_id: int
    suite: str
    suite_version: str
    variants: tuple[str, ...]
    seeds: tuple[int, ...]

    def cells(self) -> Q:
        return Q(version_id=self.version_id, suite=self.suite, suite_version=self.suite_version,
                 variant__in=list(self.variants), seed__in=list(self.seeds))


def groups(cells, *, per_variant: bool = True) -> list[Group]:
    """Groups covering ``cells`` (a queryset), in a stable order: one per variant, or with
    ``per_variant=False`` one per set of variants sharing the same seeds."""
    by_variant: dict[tuple[int, str, str, str], list[int]] = {}
    for version_id, suite, suite_version, variant, seed in cells.order_by(
            "version_id", "suite", "suite_version", "variant", "seed").values_list(
            "version_id", "suite", "suite_version", "variant", "seed"):
        by_variant.setdefault((version_id, suite, suite_version, variant), []).append(seed)
    merged: dict[tuple, list[str]] = {}
    for (version_id, suite, suite_version, variant), seeds in by_variant.items():
        seeds_key = tuple(sorted(set(seeds)))
        key = (version_id, suite, suite_version, variant if per_variant else None, seeds_key)
        merged.setdefault(key, []).append(variant)
    return [Group(version_id, suite, suite_version, tuple(variants), seeds)
            for (version_id, suite, suite_version, _, seeds), variants in merged.items()]


# --- the work -------------------------------------------------------------------------------


def run_submission(submission_id: int) -> None:
    """Run every queued cell of the submission here; cells held elsewhere are skipped."""
    submission = Submission.objects.get(pk=submission_id)
    worker = f"thread@{socket.gethostname()}"
    for group in groups(submission.cells.filter(status=Cell.QUEUED), per_variant=False):
        run = GroupRun(group, worker)
        if not run.claim():
            continue
        try:
            run.store(run.execute())
        except Exception as exc:  # the objective's own failures come back as results
            log.exception("cells of %s failed outside the objective", group)
            run.fail(exc)


class GroupRun:
    """One worker's go at a group: claim it, train it with heartbeats, store it.

    Every write after the claim is fenced by it (see :mod:`webapp.storage`), so a worker
    that lost its cells (the reaper gave them away) can no longer write them.
    """

    def __init__(self, group: Group, worker: str, held: Mapping[int, int] | None = None):
        self.group, self.worker = group, worker
        self.claimed: storage.Claim = {int(k): int(v) for k, v in (held or {}).items()}
        self._version: ObjectiveVersion | None = None
        self._suite: Suite | None = None

    @property
    def version(self) -> ObjectiveVersion:
        if self._version is None:
            self._version = ObjectiveVersion.objects.select_related("objective").get(
                pk=self.group.version_id)
        return self._version

    @property
    def suite(self) -> Suite:
        if self._suite is None:
            self._suite = suite_at(self.group.suite, self.group.suite_version)
        return self._suite

    def claim(self) -> bool:
        """Take the group's cells that nobody else holds; False when there are none."""
        ids = list(Cell.objects.filter(self.group.cells()).values_list("pk", flat=True))
        self.claimed = storage.claim(ids, worker=self.worker, held_claim=self.claimed)
        return bool(self.claimed)

    def members(self) -> tuple[list[str], list[int]]:
        """The claimed cells' variants and seeds (all of the group's unless some were
        finished or held elsewhere; cells not claimed are trained but not stored)."""
        pairs = list(Cell.objects.filter(pk__in=list(self.claimed)).values_list(
            "variant", "seed"))
        return sorted({v for v, _ in pairs}), sorted({s for _, s in pairs})

    def execute(self, *, device: str | None = None) -> list[CellResult]:
        """Train and judge the claimed cells while beating their heartbeat."""
        variants, seeds = self.members()
        version = self.version
        device = device or device_for(self.suite, variants)
        with Heartbeat(self.claimed) as beat:
            if version.objective.is_builtin:  # trusted baselines: in this process
                beat.start_thread()
                with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
                    objective = load_stored(version, Path(tmp))
                    options = {} if device == "cpu" else {"device": device}
                    results = self.suite.run_cells(objective, variants, seeds, **options)
                    for r in results:
                        r.error = scrub_paths(scrub_paths(r.error, Path(tmp).resolve()), tmp)
            else:
                results = _sandboxed(self.suite, version, variants, seeds, device, beat.beat)
        return results

    def store(self, results: list[CellResult], device: str | None = None) -> int:
        """Store the results into the cells still held; database blips are retried here,
        so a few seconds of a restarting database do not throw the training away."""
        from harness.environment import environment

        env = environment(device or device_for(self.suite, list(self.group.variants)))
        return retry_db(lambda: storage.store_results(self.version, self.suite, results, env,
                                                      claim=self.claimed))

    def end(self, status: str, reason: str, error: str) -> int:
        """End the held cells without results (time limit, infrastructure)."""
        return storage.finish(storage.held(self.claimed), status, reason, error)

    def fail(self, exc: BaseException) -> None:
        """Fail the held cells for an exception raised outside the objective's training."""
        reason, message = failure(exc)
        try:
            self.end(Cell.FAILED, reason, message)
        except DB_ERRORS:
            log.exception("could not mark cells of %s failed; the reaper will requeue them",
                          self.group)

    def release(self) -> list[int]:
        return storage.release(storage.held(self.claimed))


def _sandboxed(suite: Suite, version: ObjectiveVersion, variants: list[str], seeds: list[int],
               device: str, heartbeat: Callable[[], None]) -> list[CellResult]:
    """A submitted objective's cells, trained in the sandbox and judged here."""
    try:
        from harness.sandbox import run_cells_sandboxed
    except ImportError as exc:
        raise InfrastructureError("the sandbox is not available on this worker") from exc
    try:
        return run_cells_sandboxed(suite, version.code, code_filename(version.objective.slug),
                                   dict(version.hyperparameters), variants, seeds,
                                   threads=torch_threads(), device=device, heartbeat=heartbeat)
    except DB_ERRORS:
        raise  # the heartbeat's database, retried as such
    except Exception as exc:
        if type(exc).__name__ == "SoftTimeLimitExceeded":
            raise  # the worker's time limit, not the sandbox's failure
        raise InfrastructureError(f"the sandbox failed: {type(exc).__name__}: {exc}") from exc


def failure(exc: BaseException) -> tuple[str, str]:
    """(reason, message) for an exception outside the objective's training."""
    from harness.objectives.loading import ObjectiveError

    if isinstance(exc, ObjectiveError):
        return "objective", exc.message
    if isinstance(exc, LookupError) and "no longer available" in str(exc):
        return "infrastructure", str(exc)
    return "infrastructure", INTERNAL_ERROR


def retry_db(fn: Callable[[], int], tries: int = 6, first_wait: float = 0.5) -> int:
    """``fn()``, retried with exponential backoff while the database is unreachable."""
    wait = first_wait
    for attempt in range(tries):
        try:
            return fn()
        except DB_ERRORS:
            if attempt == tries - 1:
                raise
            log.warning("database unavailable; retrying in %.1f s", wait, exc_info=True)
            connection.close()
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")


class Heartbeat:
    """Keeps ``heartbeat_at`` of the claimed cells fresh while they train.

    ``beat()`` may be called as often as one likes (the sandbox calls it every few
    seconds); it writes at most once per ``HARNESS_HEARTBEAT_INTERVAL``. In-process runs
    start a thread that beats. A failing database only skips beats: the reaper decides
    staleness, and the fenced writes make a lost claim harmless.
    """

    def __init__(self, claim: Mapping[int, int]):
        self.claim = dict(claim)
        self.interval = float(settings.HARNESS_HEARTBEAT_INTERVAL)
        self.last = time.monotonic()  # the claim itself just set heartbeat_at
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def beat(self) -> None:
        with self._lock:
            if time.monotonic() - self.last < self.interval:
                return
            self.last = time.monotonic()
        try:
            refresh_connection()
            if storage.heartbeat(self.claim) == 0 and not self.lost:
                self.lost = True
                log.warning("cells %s are no longer held by this worker", sorted(self.claim))
        except DB_ERRORS:
            log.warning("heartbeat not written (database unavailable)")
            connection.close()

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="harness-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.wait(min(self.interval, 1.0)):
                self.beat()
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def refresh_connection() -> None:
    """Drop this thread's database connection if it broke or aged (not inside a transaction,
    where closing it would lose the transaction)."""
    if not connection.in_atomic_block:
        close_old_connections()


def torch_threads() -> int:
    """Threads a training process of this worker may use (HARNESS_TORCH_THREADS)."""
    value = os.environ.get("HARNESS_TORCH_THREADS")
    if value:
        return max(1, int(value))
    import torch

    return torch.get_num_threads()


def device_for(suite: Suite, variants: list[str]) -> str:
    """``cuda`` for cells routed to the gpu queue when this machine has one, else ``cpu``."""
    wanted = os.environ.get("HARNESS_DEVICE")
    if wanted:
        return wanted
    if suite.queue_for(variants) != "gpu":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_stored(version: ObjectiveVersion, directory: Path):
    """The stored code loaded from a private file, with the stored hyperparameters."""
    from harness.objectives.loading import load_objective

    path = directory / code_filename(version.objective.slug)
    path.write_text(version.code, encoding="utf-8")
    return load_objective(str(path), version.hyperparameters)


def code_filename(slug: str) -> str:
    """A module-safe file name for an objective's code: ``my-loss`` → ``my_loss.py``."""
    stem = re.sub(r"\W+", "_", slug).strip("_") or "objective"
    return f"{'_' if stem[0].isdigit() else ''}{stem}.py"


def scrub_paths(text: str, directory: str | Path) -> str:
    """Messages name the user's file, never the server's temporary directory."""
    return text.replace(str(directory).rstrip("/") + "/", "") if text else text


def _import(dotted: str) -> Callable[[Submission], None]:
    module, _, name = dotted.partition(":")
    if not name:
        raise ValueError(f"HARNESS_RUNNER must be inline, thread, none or module:function, "
                         f"got {dotted!r}")
    return getattr(importlib.import_module(module), name)


# --- what the run status page shows ------------------------------------------------------

STATUS_LABELS = {Cell.QUEUED: "queued", Cell.RUNNING: "running", Cell.OK: "done",
                 Cell.DIVERGED: "diverged", Cell.FAILED: "failed", Cell.TIMEOUT: "timeout",
                 Cell.KILLED: "killed"}
# What a cell that ended without metrics says, before its typed reason.
STATUS_WORDS = {Cell.FAILED: "failed while running", Cell.TIMEOUT: "timed out",
                Cell.KILLED: "killed by the sandbox"}
OWNER_ONLY = "details are shown to the objective's owner only"
OUTPUT_SHOWN = 4_000  # characters of captured output on the page (the tail: the last words)


def run_state(submission: Submission, viewer) -> dict:
    """A submission's cells and counts as plain data (the page and status.json share it).

    Results, states, typed reasons, attempts and workers are public; the error text and
    the captured output (they can quote the code) are the owner's: ``None`` for others.
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
        details = bool(c.error or c.output)
        rows.append({
            "id": c.pk, "suite": c.suite, "suite_version": c.suite_version,
            "variant": c.variant, "seed": c.seed, "status": c.status,
            "label": STATUS_LABELS[c.status], "reason": reason_text(c, owner),
            "reason_code": c.reason or None,
            "attempts": c.attempts, "worker": c.worker or None,
            "error": (c.error or None) if owner else None,
            "output": _tail(c.output) if owner else None,
            "has_details": details,
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


def reason_text(cell: Cell, owner: bool = False) -> str:
    """Why a cell is where it is, in words; for others than the owner, never the error."""
    if cell.status == Cell.DIVERGED:
        step = "" if cell.diverged_step is None else f" at step {cell.diverged_step}"
        return f"non-finite loss{step}"
    if cell.status == Cell.QUEUED and cell.attempts:
        return f"waiting to run again (attempt {cell.attempts + 1})"
    if cell.status not in STATUS_WORDS:
        return ""
    words = STATUS_WORDS[cell.status]
    if cell.reason in REASONS:
        words = f"{words}: {REASONS[cell.reason]}"
    if not owner and (cell.error or cell.output):
        words = f"{words} ({OWNER_ONLY})"
    return words


def _tail(output: str) -> str | None:
    if not output:
        return None
    if len(output) <= OUTPUT_SHOWN:
        return output
    return f"[… {len(output) - OUTPUT_SHOWN} earlier characters not shown]\n" + (
        output[-OUTPUT_SHOWN:])


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
