"""Where a submission's queued cells run: ``settings.HARNESS_EXECUTOR`` selects

- ``"thread"`` (default): one daemon worker thread per process takes submission ids
  from a queue and runs them, so the request that queued them returns at once;
- ``"inline"``: run synchronously inside ``enqueue`` (tests that want results now);
- ``"none"``: leave the cells queued for an external worker;
- ``"package.module:function"``: any callable taking the submission, e.g.
  ``"tasks.dispatch:enqueue"``, which sends each group to a Celery queue.

Whatever the executor, the work is the same :class:`~webapp.execution.groups.GroupRun`.
"""

from __future__ import annotations

import importlib
import logging
import queue
import socket
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection

from harness.storage.models import Cell, Submission
from webapp.execution.groups import GroupRun, groups

log = logging.getLogger(__name__)


def enqueue(submission: Submission) -> None:
    """Hand ``submission``'s queued cells to the configured executor; never blocks on training."""
    backend = getattr(settings, "HARNESS_EXECUTOR", "thread")
    if backend == "inline":
        run_submission(submission.pk)
    elif backend == "thread":
        _worker().submit(submission.pk)
    elif backend == "none":
        return
    else:
        _import(backend)(submission)


def run_submission(submission_id: int) -> None:
    """Run every queued cell of the submission here; cells held elsewhere are skipped."""
    submission = Submission.objects.get(pk=submission_id)
    worker = f"thread@{socket.gethostname()}"
    for group in groups(submission.cells.filter(status=Cell.QUEUED), per_variant=False):
        run = GroupRun(group, worker)
        if not run.claim():
            continue
        try:
            run.store(run.execute())
        except Exception as exc:  # the objective's own failures come back as results
            log.exception("cells of %s failed outside the objective", group)
            run.fail(exc)


def _import(dotted: str) -> Callable[[Submission], None]:
    module, _, name = dotted.partition(":")
    if not name:
        raise ValueError(f"HARNESS_EXECUTOR must be inline, thread, none or module:function, "
                         f"got {dotted!r}")
    return getattr(importlib.import_module(module), name)


# --- the thread executor ----------------------------------------------------------------


class ThreadWorker:
    """One daemon thread running submissions in arrival order."""

    def __init__(self) -> None:
        self.queue: queue.Queue[int] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="harness-runner", daemon=True)
        self.thread.start()

    def submit(self, submission_id: int) -> None:
        self.queue.put(submission_id)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted id is done (tests); False on timeout."""
        done = threading.Event()

        def wait() -> None:
            self.queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout)

    def _loop(self) -> None:
        while True:
            submission_id = self.queue.get()
            try:
                close_old_connections()
                run_submission(submission_id)
            except Exception:
                log.exception("submission %s could not be run", submission_id)
            finally:
                connection.close()  # this thread's connection; never leak it past the run
                self.queue.task_done()


_WORKER: ThreadWorker | None = None
_WORKER_LOCK = threading.Lock()


def _worker() -> ThreadWorker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or not _WORKER.thread.is_alive():
            _WORKER = ThreadWorker()
        return _WORKER


def drain(timeout: float | None = None) -> bool:
    """Wait for the thread executor to finish what it was given (True if idle)."""
    return True if _WORKER is None else _WORKER.drain(timeout)
