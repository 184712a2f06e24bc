"""Send a submission's queued cells to the workers: ``HARNESS_EXECUTOR=tasks.dispatch:enqueue``.

A submission's queued cells are split into groups (one objective version, suite, variant;
its seeds, so the suite trains the seeds as one batch), each sent to the queue its
variants need (``suite.queue_for``: ``gpu`` or ``cpu``) with time limits from the
suite's resource budget. Sending twice is harmless: a task whose cells are finished or
held elsewhere does nothing.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from harness.contract.chunks import members_trained
from harness.contract.registry import suite_at
from harness.contract.suite import Resources
from harness.runner.group import is_tuned_final
from harness.storage.models import Cell, Submission
from tasks.limits import seed_chunks, time_limits
from webapp.execution.groups import QueuedGroup, groups

log = logging.getLogger(__name__)


def enqueue(submission: Submission) -> int:
    """Send the submission's queued cells; returns the number of messages sent.

    A broker that cannot be reached is logged, not raised: the cells stay queued and the
    reaper sends them once the broker is back.
    """
    return enqueue_cells(submission.cells.filter(status=Cell.QUEUED))


def enqueue_cells(cells, connection=None) -> int:
    """Send the groups covering the queued ones of ``cells`` (a queryset), through the app's
    broker or the given kombu ``connection``."""
    sent = 0
    for group in groups(cells.filter(status=Cell.QUEUED)):
        for part in split(group):
            # Stamped before the message leaves: a worker that takes it at once must not
            # find the rows locked by this update (its claim skips locked rows).
            stamped = list(Cell.objects.filter(part.cells(), status=Cell.QUEUED)
                           .values_list("pk", flat=True))
            Cell.objects.filter(pk__in=stamped).update(enqueued_at=timezone.now())
            try:
                send(part, connection=connection)
            except Exception:  # noqa: BLE001 - the broker is down: the reaper resends
                log.exception("could not send %s; it stays queued for the reaper", part)
                Cell.objects.filter(pk__in=stamped, status=Cell.QUEUED).update(
                    enqueued_at=None)
                return sent
            sent += 1
    return sent


def route(group: QueuedGroup) -> dict:
    """``apply_async`` options of a group: its queue and its soft and hard time limits (for
    the members it trains: whole chunks, harness/contract/chunks.py)."""
    queue, resources = _placement(group)
    soft, hard = time_limits(resources, _members(group))
    return {"queue": queue, "soft_time_limit": soft, "time_limit": hard}


def _chunk(group: QueuedGroup) -> int:
    """Seeds per member chunk of the group's suite (1 where it is gone)."""
    try:
        return suite_at(group.suite, group.suite_version).chunk
    except (LookupError, KeyError):
        return 1


def _members(group: QueuedGroup) -> int:
    """Members the group's task trains: its cells' whole chunks, and for a tuned track's
    final cells the protocol's search too (k trials × search seeds per variant)."""
    try:
        suite = suite_at(group.suite, group.suite_version)
        members = members_trained(suite, group.variants, group.seeds)
        if is_tuned_final(group.suite_version) and suite.tuning is not None:
            members += len(group.variants) * suite.tuning.search_members
        return members
    except (LookupError, KeyError):  # the task fails its cells with a clear message
        return len(group.seeds) * len(group.variants)


def send(group: QueuedGroup, connection=None) -> None:
    from tasks.tasks import run_queued_group

    (variant,) = group.variants  # a task trains one variant's seeds
    run_queued_group.apply_async(
        args=[group.version_id, group.suite, group.suite_version, variant, list(group.seeds)],
        connection=connection, **route(group))


def split(group: QueuedGroup) -> list[QueuedGroup]:
    """The group in parts whose hard time limit fits Redis's visibility timeout; a tuned
    track's final cells stay whole (each part would run the whole search again)."""
    from tasks.celery import app

    if is_tuned_final(group.suite_version):
        return [group]
    visibility = float(app.conf.get("harness_visibility_timeout") or 3600)
    return [QueuedGroup(group.version_id, group.suite, group.suite_version, group.variants,
                  tuple(part))
            for part in seed_chunks(_placement(group)[1], list(group.seeds), visibility,
                                    _chunk(group))]


def _placement(group: QueuedGroup) -> tuple[str, Resources]:
    """The group's queue and its suite's resource budget; a suite version or variant that
    no longer exists goes to the cpu queue with the default budget, and the task fails its
    cells with a clear message."""
    try:
        suite = suite_at(group.suite, group.suite_version)
        return suite.queue_for(group.variants), suite.resources
    except (LookupError, KeyError):
        return "cpu", Resources()

