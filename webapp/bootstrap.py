"""How far the built-in baselines queued on a first start are (the home page's
"Baselines: N of M cells done"); tasks/bootstrap.py queues them."""

from __future__ import annotations

from harness.contract.registry import all_suites
from harness.storage.models import Cell


def baselines_progress() -> tuple[int, int] | None:
    """(finished, all) of the built-in baselines' cells on the suites' current versions
    while some are still queued or running; ``None`` once none is (nothing to announce)."""
    current = [(s.name, s.version) for s in all_suites()]
    cells = Cell.objects.filter(version__objective__is_builtin=True)
    mine = Cell.objects.none()
    for name, version in current:
        mine |= cells.filter(suite=name, suite_version=version)
    pending = mine.filter(status__in=(Cell.QUEUED, Cell.RUNNING)).count()
    if not pending:
        return None
    total = mine.count()
    return total - pending, total
