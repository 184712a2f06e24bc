"""Surviving a database that restarts under a running worker."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, close_old_connections, connection

log = logging.getLogger(__name__)

DB_ERRORS = (OperationalError, InterfaceError)


def retry_db(fn: Callable[[], int], tries: int = 6, first_wait: float = 0.5) -> int:
    """``fn()``, retried with exponential backoff while the database is unreachable."""
    wait = first_wait
    for attempt in range(tries):
        try:
            return fn()
        except DB_ERRORS:
            if attempt == tries - 1:
                raise
            log.warning("database unavailable; retrying in %.1f s", wait, exc_info=True)
            connection.close()
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")


def refresh_connection() -> None:
    """Drop this thread's database connection if it broke or aged (not inside a transaction,
    where closing it would lose the transaction)."""
    if not connection.in_atomic_block:
        close_old_connections()


