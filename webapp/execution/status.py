"""What the run status page and ``status.json`` show of a submission's cells."""

from __future__ import annotations

from django.utils import timezone

from harness.contract.registry import get_suite
from harness.contract.suite import REASONS, Suite
from harness.runner.group import is_tuned_final
from harness.storage.models import Cell, Submission

STATUS_LABELS = {Cell.QUEUED: "queued", Cell.RUNNING: "running", Cell.OK: "done",
                 Cell.DIVERGED: "diverged", Cell.FAILED: "failed", Cell.TIMEOUT: "timeout",
                 Cell.KILLED: "killed"}
# What a cell that ended without metrics says, before its typed reason.
STATUS_WORDS = {Cell.FAILED: "failed while running", Cell.TIMEOUT: "timed out",
                Cell.KILLED: "killed by the sandbox"}
OWNER_ONLY = "details are shown to the objective's owner only"
CAPTURED_SHOWN = 4_000  # characters of captured output on the page (the tail: the last words)


def run_state(submission: Submission, viewer) -> dict:
    """A submission's cells and counts as plain data (the page and status.json share it).

    Results, states, typed reasons, attempts and workers are public; the error text and
    the captured output (they can quote the code) are the owner's: ``None`` for others.
    """
    from django.urls import reverse

    from harness.storage.models import Metric

    owner = viewer.is_authenticated and viewer.pk == submission.owner_id
    cells = list(submission.cells.order_by("suite", "suite_version", "variant", "seed"))
    headlines = {name: _suite_or_none(name) for name in {c.suite for c in cells}}
    values = dict(((cell_id, name), value) for cell_id, name, value in
                  Metric.objects.filter(cell__in=cells, name__in={
                      s.headline for s in headlines.values() if s}).values_list(
                      "cell_id", "name", "value"))
    counts = {label: 0 for label in STATUS_LABELS}
    now = timezone.now()
    rows = []
    for c in cells:
        counts[c.status] += 1
        suite = headlines[c.suite]
        value = values.get((c.pk, suite.headline)) if suite else None
        details = bool(c.error or c.captured)
        rows.append({
            "id": c.pk, "suite": c.suite, "suite_version": c.suite_version,
            "tuned": is_tuned_final(c.suite_version),  # its search's cells come with it
            "variant": c.variant, "seed": c.seed, "status": c.status,
            "label": STATUS_LABELS[c.status], "reason": reason_text(c, owner),
            "reason_code": c.reason or None,
            "attempts": c.attempts, "worker": c.worker or None,
            "error": (c.error or None) if owner else None,
            "captured": _tail(c.captured) if owner else None,
            "has_details": details,
            "headline": None if value is None else {
                "metric": suite.headline, "value": value,
                "text": _metric_text(suite, value)},
            "wall_time": c.wall_time,
            **timing(c, now),
        })
    _first_of_groups(rows, cells)
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
        "tuned": sorted({c.suite for c in cells if is_tuned_final(c.suite_version)}),
        "cells": rows,
    }


def _first_of_groups(rows: list[dict], cells: list[Cell]) -> None:
    """``group_first``: whether a row is the first of its group's rows (cells a worker
    claimed together, in adjacent rows: one variant's seeds, or an objective's variants),
    the only one that shows the group's shared time, not one line per cell."""
    previous = None
    for row, c in zip(rows, cells, strict=True):
        key = (c.worker, c.started_at, c.status == Cell.RUNNING) if c.started_at else None
        row["group_first"] = key is None or key != previous or not row["time_text"]
        previous = key


def timing(cell: Cell, now) -> dict:
    """How far a running cell's group has come and about how long it has left (its
    progress extrapolated from the time since the claim); for a finished cell, the group
    it trained in: its members and wall time, trained and judged together."""
    env = cell.environment or {}
    members, seconds = env.get("group_members"), env.get("group_seconds")
    out = {"progress": None, "eta_seconds": None, "group_members": members,
           "group_seconds": seconds, "time_text": ""}
    if cell.status == Cell.RUNNING:
        p = cell.progress
        if p is None or p <= 0 or cell.started_at is None:
            return out
        elapsed = max((now - cell.started_at).total_seconds(), 0.0)
        eta = elapsed * (1 - p) / p
        out.update(progress=p, eta_seconds=round(eta, 1),
                   time_text=f"{p:.0%} of its group · about {_duration(eta)} left")
    elif cell.status in Cell.FINISHED and seconds is not None:
        together = f", {members} cells together" if members and members > 1 else ""
        out["time_text"] = f"{_duration(seconds)}{together}"
    return out


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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
    if not owner and (cell.error or cell.captured):
        words = f"{words} ({OWNER_ONLY})"
    return words


def _tail(captured: str) -> str | None:
    if not captured:
        return None
    if len(captured) <= CAPTURED_SHOWN:
        return captured
    return f"[… {len(captured) - CAPTURED_SHOWN} earlier characters not shown]\n" + (
        captured[-CAPTURED_SHOWN:])


def _metric_text(suite: Suite, value: float) -> str:
    spec = suite.headline_metric
    return spec.format(value) + ("%" if spec.percent else "")


def _suite_or_none(name: str) -> Suite | None:
    try:
        return get_suite(name)
    except KeyError:
        return None


