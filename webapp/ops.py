"""What an operator checks first (issue 35, staff tools): the staff page ``/ops/`` and
``manage.py ops`` print the same snapshot, read from the results database.

- workers: every worker that held a cell in the last 24 hours, its last heartbeat and the
  cells it runs now (a worker's heartbeat is written while it trains, so an idle one shows
  its last cell's);
- queues: per queue (``cpu``, ``gpu``) the cells waiting, and the age of the oldest one
  since it was sent (a queue whose oldest cell keeps ageing has no live worker);
- the last 24 hours: cells finished by state, and the failures by reason.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Max, Min, Q
from django.utils import timezone

from harness.contract.registry import suite_at
from harness.contract.suite import SuiteError
from harness.storage.models import Cell

WINDOW = timedelta(hours=24)


def snapshot(now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    since = now - WINDOW
    workers = (Cell.objects.exclude(worker="").filter(
        Q(heartbeat_at__gte=since) | Q(finished_at__gte=since) | Q(status=Cell.RUNNING))
        .values("worker").annotate(last=Max("heartbeat_at"), running=Count(
            "id", filter=Q(status=Cell.RUNNING))).order_by(F("last").desc(nulls_last=True),
                                                           "worker"))
    queues: dict[str, dict[str, Any]] = {q: {"queued": 0, "oldest": None}
                                         for q in ("cpu", "gpu")}
    # counted per variant in the database (the queue is the variant's), not cell by cell
    waiting = (Cell.objects.filter(status=Cell.QUEUED)
               .values_list("suite", "suite_version", "variant")
               .annotate(n=Count("id"), oldest=Min("enqueued_at")).order_by())
    for suite, version, variant, n, sent in waiting:
        entry = queues.setdefault(_queue(suite, version, variant), {"queued": 0, "oldest": None})
        entry["queued"] += n
        if sent is not None and (entry["oldest"] is None or sent < entry["oldest"]):
            entry["oldest"] = sent
    finished = Cell.objects.filter(finished_at__gte=since)
    states = Counter(dict(finished.values_list("status").annotate(n=Count("id"))
                          .values_list("status", "n")))
    reasons = Counter(dict(finished.filter(status__in=Cell.FAILURES).values_list("reason")
                           .annotate(n=Count("id")).values_list("reason", "n")))
    return {
        "at": now.isoformat(),
        "workers": [{"worker": w["worker"], "running": w["running"],
                     "last_heartbeat": w["last"].isoformat() if w["last"] else None,
                     "seconds_ago": _age(now, w["last"])} for w in workers],
        "queues": [{"queue": q, "queued": e["queued"],
                    "oldest_sent_seconds_ago": _age(now, e["oldest"])}
                   for q, e in sorted(queues.items())],
        "running": Cell.objects.filter(status=Cell.RUNNING).count(),
        "finished_24h": dict(sorted(states.items())),
        "failures_24h": {reason or "(none)": n for reason, n in reasons.most_common()},
    }


def lines(snap: dict[str, Any]) -> list[str]:
    """The snapshot as the command prints it."""
    out = [f"at {snap['at']}", "", "workers (last 24 h):"]
    out += [f"  {w['worker']}: {w['running']} running, last heartbeat "
            f"{_ago(w['seconds_ago'])}" for w in snap["workers"]] or ["  none"]
    out += ["", "queues:"]
    out += [f"  {q['queue']}: {q['queued']} queued, oldest sent "
            f"{_ago(q['oldest_sent_seconds_ago'])}" for q in snap["queues"]]
    out += ["", f"running now: {snap['running']}", "finished in the last 24 h:"]
    out += [f"  {s}: {n}" for s, n in snap["finished_24h"].items()] or ["  none"]
    out += ["failures by reason in the last 24 h:"]
    out += [f"  {r}: {n}" for r, n in snap["failures_24h"].items()] or ["  none"]
    return out


def _queue(suite: str, version: str, variant: str) -> str:
    try:
        return suite_at(suite, version).queue_for([variant])
    except (LookupError, SuiteError):  # a suite or variant this code no longer has
        return "unknown"


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round((now - then).total_seconds(), 1)


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.0f} s ago"
