"""The one task: run a group of cells (one objective version, suite, variant; its seeds).

Delivery is at least once (late acks, redelivery of a dead worker's message); the claim
in the database makes it exactly once for results: a redelivered or duplicated message
finds its cells finished or held and does nothing, and a worker that lost its cells can
no longer write them (:mod:`harness.storage.store`).
"""

from __future__ import annotations

import logging
import random

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from celery.worker.request import Request
from kombu.exceptions import OperationalError as BrokerError

from tasks.celery import app

log = logging.getLogger(__name__)

MAX_RETRIES = 6


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Errors retried with backoff: the database, the broker, the sandbox's machinery."""
    from django.db import InterfaceError, OperationalError

    from webapp.execution.groups import InfrastructureError

    return (OperationalError, InterfaceError, BrokerError, ConnectionError, InfrastructureError)


def backoff(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: 2, 4, 8, ... capped at 60, with jitter."""
    return min(60.0, 2.0 * 2 ** retries) * random.uniform(0.8, 1.2)


def worker_name() -> str:
    from tasks.worker import NODE

    return NODE.name


class GroupRequest(Request):
    """The worker's main process's view of a run_queued_group message.

    When the pool process running it dies (killed, out of memory), its cells go back to
    the queue before the message is rejected and redelivered, so the redelivery can take
    them at once instead of waiting for their heartbeat to go stale.
    """

    def on_failure(self, exc_info, send_failed_event=True, return_ok=False):
        exc = exc_info.exception
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        if isinstance(exc, WorkerLostError):
            _release_here(self.args, self.kwargs)
        return super().on_failure(exc_info, send_failed_event=send_failed_event,
                                  return_ok=return_ok)


class GroupTask(Task):
    Request = GroupRequest
    acks_late = True
    reject_on_worker_lost = True
    max_retries = MAX_RETRIES

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        # The hard time limit killed the pool process (called in the main process).
        if isinstance(exc, TimeLimitExceeded):
            _end_here(args, kwargs, "timeout", "wall",
                      f"killed at the worker's hard time limit ({exc.args[0] if exc.args else '?'}"
                      " s)")


@app.task(bind=True, base=GroupTask, name="tasks.run_queued_group")
def run_queued_group(self, version_id: int, suite: str, suite_version: str, variant: str,
              seeds: list[int], held: dict | None = None) -> dict:
    """Claim, train and store the group's cells; see the module docstring.

    ``held`` is this task's own claim carried over an infrastructure retry.
    """
    from webapp.execution.groups import GroupRun, QueuedGroup

    group = QueuedGroup(version_id, suite, suite_version, (variant,), tuple(sorted(seeds)))
    run = GroupRun(group, self.request.hostname or worker_name(), held=held)
    try:
        if not run.claim():
            return {"claimed": 0, "stored": 0}
        results = run.execute()
        stored = run.store(results)
        return {"claimed": len(run.claimed), "stored": stored}
    except SoftTimeLimitExceeded:
        limit = (self.request.timelimit or (None, None))[1]
        log.warning("%s ran past its soft time limit (%s s)", group, limit,
                    extra=where(group))
        run.end("timeout", "wall", f"ran past the worker's time limit ({limit} s)")
        return {"claimed": len(run.claimed), "stored": 0}
    except infrastructure_errors() as exc:
        if self.request.retries >= self.max_retries:
            log.exception("%s: giving up after %d retries", group, self.request.retries,
                          extra=where(group))
            run.end("failed", "infrastructure",
                    f"infrastructure error after {self.request.retries + 1} tries "
                    f"(not caused by the objective): {type(exc).__name__}")
            return {"claimed": len(run.claimed), "stored": 0}
        log.warning("%s: %s: %s; retrying", group, type(exc).__name__, exc,
                    extra=where(group))
        kwargs = {**self.request.kwargs, "held": run.claimed or None}
        raise self.retry(exc=exc, countdown=backoff(self.request.retries),
                         kwargs=kwargs) from exc
    except Exception as exc:  # noqa: BLE001 - outside the objective: a failed result
        log.exception("%s failed outside the objective", group, extra=where(group))
        run.fail(exc)
        return {"claimed": len(run.claimed), "stored": 0}


def where(group) -> dict[str, list[int]]:
    """A worker-side log line's context (``extra=``): the group's cell ids and the runs
    (submissions) they belong to, as the text format and the JSON lines show them. Never
    raises: the database may be what failed."""
    try:
        from harness.storage.models import Cell, Submission

        cells = sorted(Cell.objects.filter(group.cells()).values_list("id", flat=True))
        runs = sorted(set(Submission.objects.filter(cells__in=cells)
                          .values_list("id", flat=True)))
    except Exception:  # noqa: BLE001
        return {"cells": [], "runs": []}
    return {"cells": cells, "runs": runs}


def _group(args, kwargs):
    from webapp.execution.groups import QueuedGroup

    names = ("version_id", "suite", "suite_version", "variant", "seeds")
    values = {**dict(zip(names, args, strict=False)), **(kwargs or {})}
    return QueuedGroup(values["version_id"], values["suite"], values["suite_version"],
                 (values["variant"],), tuple(values["seeds"]))


def _held_here(args, kwargs):
    """Running cells of the message's group held by this worker (main-process view)."""
    from django.db.models import Q

    return _group(args, kwargs).cells() & Q(status="running", worker=worker_name())


def _release_here(args, kwargs) -> None:
    from harness.storage import store
    from webapp.execution.database import refresh_connection

    try:
        refresh_connection()
        queued = store.release(_held_here(args, kwargs))
        log.warning("pool process lost; cells %s queued again", queued)
    except Exception:  # noqa: BLE001 - the reaper will do it once their heartbeat is stale
        log.exception("could not release the cells of a lost pool process")


def _end_here(args, kwargs, status: str, reason: str, error: str) -> None:
    from harness.storage import store
    from webapp.execution.database import refresh_connection

    try:
        refresh_connection()
        store.finish(_held_here(args, kwargs), status, reason, error)
    except Exception:  # noqa: BLE001
        log.exception("could not mark the cells of a timed-out task")
