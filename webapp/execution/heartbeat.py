"""Keeping a claim alive while its cells train."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from django.conf import settings
from django.db import connection

from harness.storage import store
from webapp.execution.database import DB_ERRORS, refresh_connection

log = logging.getLogger(__name__)


class Heartbeat:
    """Keeps ``heartbeat_at`` of the claimed cells fresh while they train.

    ``beat()`` may be called as often as one likes (the sandbox calls it every few
    seconds); it writes at most once per ``HARNESS_HEARTBEAT_INTERVAL``. Every run also
    starts a thread that beats, so a call that runs long (a traced graph in the trusted
    worker) does not look like a lost worker. A failing database only skips beats: the
    reaper decides staleness, and the fenced writes make a lost claim harmless.
    """

    def __init__(self, claim: Mapping[int, int], cells: int = 0):
        self.claim = dict(claim)
        self.cells, self.done = cells, 0.0  # cells the group trains; cells' worth done
        self.interval = float(settings.HARNESS_HEARTBEAT_INTERVAL)
        self.last = time.monotonic()  # the claim itself just set heartbeat_at
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def advance(self, cells: float) -> None:
        """The trainer's progress report (cells' worth of training finished since the
        last call, e.g. members/epochs after each epoch); written with the next beat."""
        with self._lock:
            self.done += float(cells)
        self.beat()

    @property
    def progress(self) -> float | None:
        return min(self.done / self.cells, 1.0) if self.cells and self.done else None

    def beat(self) -> None:
        with self._lock:
            if time.monotonic() - self.last < self.interval:
                return
            self.last = time.monotonic()
        try:
            refresh_connection()
            if store.heartbeat(self.claim, self.progress) == 0 and not self.lost:
                self.lost = True
                log.warning("cells %s are no longer held by this worker", sorted(self.claim))
        except DB_ERRORS:
            log.warning("heartbeat not written (database unavailable)")
            connection.close()

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="harness-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.wait(min(self.interval, 1.0)):
                self.beat()
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


