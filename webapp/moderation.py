"""Cancelling a run, requeueing its failed cells and hiding an objective, each recorded
(who, when, why).

- **cancel** (the run's owner, or staff): its queued cells never run and its running ones
  end ``killed`` with reason ``cancelled``, in one transaction. A worker already training
  a cancelled cell finishes its computation but stores nothing: a result lands only in a
  cell its claim still holds as running (``store.held``), so nothing is half-written.
- **requeue** (staff): its failed, timed-out and killed cells are queued again from
  scratch and sent to the workers, like a resubmission of them.

- **hide** (staff, in the admin, with a reason): the objective leaves every board, export,
  list and API answer; its owner still sees its page, with the reason. **unhide** brings
  it back. Both bump its cells' tallies, the change signal every cached board is keyed on,
  so no cached page keeps showing (or missing) it.

Each action is a :class:`~harness.storage.models.ModerationAction` row, shown on the run
page or the objective page and in the admin.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from harness.storage.models import (
    Cell,
    CellTally,
    ModerationAction,
    Objective,
    Submission,
)


class NotAllowed(Exception):
    """The user may not do this to this run (the message says why)."""


def may_cancel(user, submission: Submission) -> bool:
    return bool(user.is_authenticated and (user.is_staff or user.pk == submission.owner_id))


def cancel(submission: Submission, user, reason: str = "") -> ModerationAction:
    if not may_cancel(user, submission):
        raise NotAllowed("only the run's owner or staff may cancel it")
    with transaction.atomic():
        pending = Cell.objects.select_for_update().filter(
            pk__in=submission.cells.values("pk"), status__in=(Cell.QUEUED, Cell.RUNNING))
        ids = list(pending.values_list("pk", flat=True))
        Cell.objects.filter(pk__in=ids).update(
            status=Cell.KILLED, reason="cancelled", finished_at=timezone.now(),
            error=f"cancelled by {user.get_username()}" + (f": {reason}" if reason else ""))
        return ModerationAction.objects.create(actor=user, action=ModerationAction.CANCEL,
                                               submission=submission, reason=reason,
                                               cells=len(ids))


def requeue(submission: Submission, user, reason: str = "") -> ModerationAction:
    from webapp.execution import executors
    from webapp.forms import queued_cell

    if not (user.is_authenticated and user.is_staff):
        raise NotAllowed("only staff may requeue a run's cells")
    with transaction.atomic():
        failed = list(submission.cells.filter(status__in=Cell.FAILURES).select_related("version"))
        for cell in failed:  # as a resubmission of them: a fresh start
            queued_cell(cell.version, _suite(cell), cell.variant, cell.seed)
        action = ModerationAction.objects.create(actor=user, action=ModerationAction.REQUEUE,
                                                 submission=submission, reason=reason,
                                                 cells=len(failed))
        transaction.on_commit(lambda: executors.enqueue(submission))
    return action


def _suite(cell: Cell):
    from harness.contract.registry import suite_at

    return suite_at(cell.suite, cell.suite_version)


def hide(objective: Objective, user, reason: str) -> ModerationAction:
    """Staff hide ``objective`` from every board, export and list; its owner sees why."""
    if not (user.is_authenticated and user.is_staff):
        raise NotAllowed("only staff may hide an objective")
    if objective.is_builtin:
        raise NotAllowed("a built-in baseline is every board's reference: it is not hidden")
    if not reason.strip():
        raise NotAllowed("say why: the owner sees the reason")
    return _set_hidden(objective, user, reason.strip(), hidden=True)


def unhide(objective: Objective, user, reason: str = "") -> ModerationAction:
    if not (user.is_authenticated and user.is_staff):
        raise NotAllowed("only staff may show a hidden objective again")
    return _set_hidden(objective, user, reason.strip(), hidden=False)


def _set_hidden(objective: Objective, user, reason: str, *, hidden: bool) -> ModerationAction:
    with transaction.atomic():
        objective.hidden_at = timezone.now() if hidden else None
        objective.hidden_reason = reason if hidden else ""
        objective.save(update_fields=["hidden_at", "hidden_reason"])
        # every cached board's fingerprint sums its tallies' changes: they move, it rebuilds
        CellTally.objects.filter(version_id__in=objective.versions.values("pk")).update(
            changes=F("changes") + 1)
        return ModerationAction.objects.create(
            actor=user, action=ModerationAction.HIDE if hidden else ModerationAction.UNHIDE,
            objective=objective, reason=reason)
