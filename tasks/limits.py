"""Time limits of a group of cells, from the suite's resource budget (no Django, no torch)."""

from __future__ import annotations

import os

from harness.contract.suite import Resources, Suite

MAX_GROUP_SEEDS = 10  # the submission form's maximum: a group is one variant's seeds
VISIBILITY_MARGIN = 600.0  # seconds between the longest hard limit and Redis redelivery


def margin() -> float:
    """Seconds between the suite's wall budget and the soft limit, and soft and hard."""
    return float(os.environ.get("HARNESS_TIME_MARGIN") or 30)


def time_limits(resources: Resources, members: int) -> tuple[float, float]:
    """(soft, hard) seconds for one task training ``members`` cells together.

    The sandbox stops a run at the suite's wall budget and reports it as a result; the
    soft limit (budget + margin) interrupts a run the sandbox did not stop (built-ins run
    in the worker) so the task can record the cells as ``timeout``; the hard limit (soft +
    margin) kills the worker's process if even that hangs.
    """
    soft = resources.wall_seconds(members) + margin()
    return soft, soft + margin()


def longest_hard_limit(suites: list[Suite], members: int = MAX_GROUP_SEEDS) -> float:
    """The longest hard limit of a task: a tuned track's (never split) trains its search's
    k × search seeds members besides its cells."""
    return max((time_limits(s.resources, members + (
        s.tuning.search_members if s.tuning is not None else 0))[1]
        for s in suites), default=0.0)


def visibility_timeout(suites: list[Suite], configured: float | None = None) -> float:
    """How long Redis keeps a delivered, unacknowledged message before handing it out again.

    It must exceed every task's hard limit, or Redis would give a long but healthy task to
    a second worker (harmless for results, since claims fence every write, but wasted
    work); dispatch splits a group whose hard limit would not fit.
    """
    if configured:
        return float(configured)
    return max(3600.0, longest_hard_limit(suites) + VISIBILITY_MARGIN)


def seed_chunks(resources: Resources, seeds: list[int], visibility: float,
                chunk: int = 1) -> list[list[int]]:
    """``seeds`` split so that each part's hard limit fits in the visibility timeout. A part
    holds the seeds of whole member chunks of ``chunk`` seeds (it trains its seeds' chunks
    whole: harness/contract/chunks.py), so two parts never train the same chunk; at least one."""
    whole: dict[int, list[int]] = {}
    for seed in seeds:
        whole.setdefault(seed // chunk, []).append(seed)
    parts = list(whole.values())
    size = len(parts)
    while size > 1 and time_limits(resources, size * chunk)[1] > visibility - 60:
        size -= 1
    return [sum(parts[i:i + size], []) for i in range(0, len(parts), max(size, 1))]
