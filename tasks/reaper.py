"""The reaper: cells whose worker died are queued and sent again.

Runs every ``HARNESS_REAP_INTERVAL`` seconds in every worker (:mod:`tasks.worker`) and
once with ``python manage.py reap``. Each round:

1. running cells whose heartbeat is older than ``HARNESS_HEARTBEAT_TIMEOUT`` go back to
   ``queued`` (keeping their attempts; out of attempts, they fail with reason
   ``infrastructure``) — their worker was killed, lost its machine, or hangs;
2. queued cells that were never sent, or sent longer than ``HARNESS_REQUEUE_AFTER``
   seconds ago while their queue is now empty (a broker restarted without its
   messages), are sent again.

Reapers in several workers may run at once: rows are taken with ``SKIP LOCKED`` and a
duplicate message is harmless (the claim lets one task run a cell; the others find it
held or finished).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from harness.storage import store
from harness.storage.models import Cell

log = logging.getLogger(__name__)


def reap(send: Callable | None = None) -> dict[str, list[int]]:
    """One round; ``send`` takes a queryset of queued cells (default: Celery dispatch)."""
    from tasks.dispatch import enqueue_cells

    send = send or enqueue_cells
    released = store.release_stale()
    if released:
        log.warning("cells %s lost their worker (no heartbeat for %.0f s): queued again",
                    released, settings.HARNESS_HEARTBEAT_TIMEOUT)
    lost = unsent_cells()
    ids = sorted(set(released) | set(lost))
    if ids:
        send(Cell.objects.filter(pk__in=ids, status=Cell.QUEUED))
    return {"released": released, "resent": ids}


def release_own(worker: str, send: Callable | None = None) -> list[int]:
    """At a worker's start: the cells a previous life of this worker held, queued and sent."""
    from tasks.dispatch import enqueue_cells

    queued = store.release(Q(worker=worker))
    if queued:
        log.warning("cells %s were held by a previous run of %s: queued again", queued, worker)
        (send or enqueue_cells)(Cell.objects.filter(pk__in=queued, status=Cell.QUEUED))
    return queued


def unsent_cells() -> list[int]:
    """Queued cells whose message is presumably lost: never sent, or sent long ago while
    their queue holds no message any more."""
    cutoff = timezone.now() - timedelta(seconds=settings.HARNESS_REQUEUE_AFTER)
    candidates = list(Cell.objects.filter(
        Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=cutoff), status=Cell.QUEUED)
        .values_list("pk", "suite", "suite_version", "variant"))
    if not candidates:
        return []
    depths = queue_depths()
    lost = []
    for pk, suite, suite_version, variant in candidates:
        if not depths.get(_queue_of(suite, suite_version, variant)):
            lost.append(pk)
    return lost


def queue_depths() -> dict[str, int | None]:
    """Messages waiting in each queue (None: the broker did not say)."""
    from tasks.celery import QUEUES, app

    depths: dict[str, int | None] = {}
    try:
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            for name in QUEUES:
                try:
                    depths[name] = channel.queue_declare(queue=name, passive=True).message_count
                except Exception:  # noqa: BLE001 - not declared yet: nothing waits in it
                    depths[name] = 0
                    channel = conn.channel()
    except Exception:  # noqa: BLE001 - broker unreachable: nothing can be sent anyway
        log.warning("broker unreachable while reaping", exc_info=True)
        return {name: 1 for name in QUEUES}
    return depths


def _queue_of(suite: str, suite_version: str, variant: str) -> str:
    from harness.contract.registry import suite_at

    try:
        return suite_at(suite, suite_version).queue_for([variant])
    except (LookupError, KeyError):
        return "cpu"
