"""How often a user may probe the held-out variants (docs/held-out.md).

Every submission runs the held-out variants beside the public ones, and their means are
shown; nothing else would bound how many objectives one user fits to them. Hosted
benchmarks with hidden test sets cap submissions per day; here the cap is on the
submissions that run held-out cells: ``HARNESS_HELDOUT_RUNS_PER_DAY`` of them (default 5)
in any 24 hours. Past it a submission runs the public variants only, and the form says so.

A submission counts from the moment it queues held-out cells, unless every one of them
ended failed for the infrastructure's reason (a lost worker, the broker): the user learnt
nothing from it. The allowance is shown on the form and in the API (``/api/quota``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Allowance:
    limit: int
    used: int
    frees_at: datetime | None  # when the oldest counted run leaves the window

    @property
    def remaining(self) -> int:
        return max(self.limit - self.used, 0)

    def to_json(self) -> dict:
        return {"held_out_runs_per_day": self.limit, "used": self.used,
                "remaining": self.remaining,
                "next_frees_at": self.frees_at.isoformat() if self.frees_at else None}

    def message(self) -> str:
        """What the form says when the allowance is spent."""
        when = self.frees_at.strftime("%Y-%m-%d %H:%M UTC") if self.frees_at else "later"
        return (f"You have run the held-out variants {self.used} times in the last 24 hours, "
                f"the limit is {self.limit}: this submission runs the public variants only. "
                f"The next held-out run is possible from {when}.")


def allowance(user, now: datetime | None = None) -> Allowance:
    from harness.storage import store
    from harness.storage.models import Cell, Submission

    now = now or timezone.now()
    limit = int(settings.HARNESS_HELDOUT_RUNS_PER_DAY)
    since = now - WINDOW
    probing = Submission.objects.filter(owner=user, created__gte=since).filter(
        cells__in=Cell.objects.filter(store.held_out_cells())).distinct()
    lost = Submission.objects.filter(pk__in=probing).exclude(
        cells__in=Cell.objects.filter(store.held_out_cells()).exclude(
            status=Cell.FAILED, reason="infrastructure"))
    counted = sorted(probing.exclude(pk__in=lost).values_list("created", flat=True))
    return Allowance(limit, len(counted), counted[0] + WINDOW if counted else None)
