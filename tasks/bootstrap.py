"""A populated board on first start: the built-in baselines' cells queued on the workers
(``manage.py populate_baselines --queue``, which the image's web entry point runs once on
an empty database); the home page counts them down (webapp/bootstrap.py).

Without the baselines the first stranger's objective would be ranked #1 against nothing;
training them inside the web process (what ``populate_baselines`` without ``--queue``
does) holds the web container for minutes, so they go to the same queues as every
submission and fill the board as the workers finish them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.storage import store
from harness.storage.models import Cell
from tasks.dispatch import enqueue_cells
from webapp.forms import queued_cell


@dataclass(frozen=True)
class Queued:
    cells: int  # queued now (those already stored are left as they are)
    messages: int  # groups sent to the broker


def queue_baselines(suites: list[str], objectives: list[str] | None = None,
                    variants: list[str] | None = None, seeds: int = 5) -> Queued:
    """Queue every baseline's cells of ``suites`` not stored yet (the suites' default
    variants, seeds 0..N-1) and send them to the workers. Cells that failed before are
    queued again; finished ones are kept, and queued ones already sent are not sent
    twice."""
    queued = []
    with transaction.atomic():
        for name in suites:
            suite = get_suite(name)
            chosen = [v for v in variants or suite.default_variants
                      if v in {x.name for x in suite.variants}]
            for objective in objectives or suite.baselines:
                if objective not in suite.baselines:
                    continue
                version = store.version_for(load_objective(objective))
                queued += [queued_cell(version, suite, v, s).pk
                           for v in chosen for s in range(seeds)]
    # not those a run before this one sent already (the reaper resends a lost message)
    pending = Cell.objects.filter(pk__in=queued, status=Cell.QUEUED, enqueued_at__isnull=True)
    return Queued(pending.count(), enqueue_cells(pending))
