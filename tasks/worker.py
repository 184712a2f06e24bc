"""What a worker process does besides tasks: its name, torch threads, and the reaper.

- ``celeryd_init`` (main process): remember the node name and the pool's concurrency.
- ``worker_process_init`` (each pool process): ``torch.set_num_threads`` with
  ``HARNESS_TORCH_THREADS``, by default the cores divided by the concurrency (at least
  one), so that processes do not oversubscribe the CPU; torch is imported once here.
- ``worker_ready`` (main process): cells still marked running under this node's own
  name belong to a previous life of this worker: they are queued again at once. Then
  the reaper thread starts (every ``HARNESS_REAP_INTERVAL`` seconds; 0 disables it).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field

from celery import signals

log = logging.getLogger(__name__)


@dataclass
class Node:
    name: str = field(default_factory=lambda: f"local@{socket.gethostname()}")
    concurrency: int | None = None
    reaper: threading.Thread | None = None
    stop: threading.Event = field(default_factory=threading.Event)


NODE = Node()


def default_threads(concurrency: int | None, cores: int | None = None) -> int:
    """Torch threads per pool process: this machine's cores shared by the pool, at least 1."""
    if cores is None:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)
    return max(1, cores // max(1, concurrency or cores))


def pool_threads() -> int:
    value = os.environ.get("HARNESS_TORCH_THREADS")
    return max(1, int(value)) if value else default_threads(NODE.concurrency)


@signals.celeryd_init.connect
def _remember_node(sender=None, instance=None, conf=None, options=None, **kwargs):
    NODE.name = str(sender or NODE.name)
    concurrency = (options or {}).get("concurrency") or getattr(instance, "concurrency", None)
    NODE.concurrency = int(concurrency) if concurrency else None


@signals.worker_process_init.connect
def _set_threads(**kwargs):
    import torch

    threads = pool_threads()
    os.environ["HARNESS_TORCH_THREADS"] = str(threads)  # the sandbox's children get as many
    torch.set_num_threads(threads)
    log.info("pool process %d trains with %d torch threads", os.getpid(), threads)


@signals.worker_ready.connect
def _start_reaper(sender=None, **kwargs):
    from django.conf import settings

    from tasks.reaper import reap, release_own

    try:
        release_own(NODE.name)
    except Exception:  # noqa: BLE001 - the database may not be up yet: the reaper retries
        log.exception("could not requeue this worker's cells from a previous run")
    interval = float(settings.HARNESS_REAP_INTERVAL)
    if interval <= 0:
        return

    def loop() -> None:
        from django.db import connection

        while not NODE.stop.wait(interval):
            try:
                reap()
            except Exception:  # noqa: BLE001 - next round; a database or broker blip
                log.warning("reaper round failed", exc_info=True)
                connection.close()
        connection.close()

    NODE.stop.clear()
    NODE.reaper = threading.Thread(target=loop, name="harness-reaper", daemon=True)
    NODE.reaper.start()


@signals.worker_shutdown.connect
def _stop_reaper(**kwargs):
    NODE.stop.set()
