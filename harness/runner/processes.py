"""Local runs over the machine's cores: one process per core, one cell group each at a time.

A *group* is the cells of one objective that train together as one seed-batched run
(some of a suite's variants × seeds). For the suites' small models, two one-thread
processes each batching some members beat one two-thread process (``bench/dispatch.py``,
``bench/seed_batching.py``), so ``harness run`` spreads its groups over worker processes
as the Celery workers do. Workers train and judge; the parent stores (one writer).

Workers are forked from a fork server that has torch imported, with one torch thread
each, so numbers never depend on how many run at once. With one worker, or one group,
everything runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from harness.contract.suite import CellResult

PRELOAD = ["torch", "numpy", "harness.train", "harness.contract.registry"]


@dataclass(frozen=True)
class LocalGroup:
    """Cells of one objective trained together: some variants × seeds of one suite version.

    ``objective`` is what :func:`harness.objectives.loading.load_objective` takes (a file,
    a built-in name, a dotted module); ``sandboxed`` trains it as the server's workers do:
    a file, whose text is ``source`` (read from it when empty), is then never imported
    outside the sandbox, and ``overrides`` are its hyperparameters.
    """

    objective: str
    suite: str
    suite_version: str
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    overrides: tuple[tuple[str, Any], ...] = ()
    sandboxed: bool = False
    source: str = ""
    row_secret: str = ""  # the version's row-order key from a server (sandboxed only)

    @property
    def cells(self) -> int:
        return len(self.variants) * len(self.seeds)


def default_workers() -> int:
    """One worker per core this process may use (``HARNESS_WORKERS`` overrides)."""
    value = os.environ.get("HARNESS_WORKERS")
    return max(1, int(value)) if value else len(os.sched_getaffinity(0))


def threads_per_worker() -> int:
    """Torch threads of each worker: 1 (``HARNESS_THREADS`` overrides): per-member loops
    round differently with more threads, and processes beat threads here anyway."""
    value = os.environ.get("HARNESS_THREADS")
    return max(1, int(value)) if value else 1


def run_groups(groups: list[LocalGroup], *, workers: int, options: Mapping[str, Any],
               on_progress: Callable[[LocalGroup, float], None],
               on_done: Callable[[LocalGroup, list[CellResult]], None]) -> None:
    """Run every group; ``on_done`` (in this process, as each finishes) receives its results
    and ``on_progress`` the cells done since the last call. Ctrl-C kills the workers: groups
    already done stay done, the others are discarded whole."""
    threads = threads_per_worker()
    if workers <= 1 or len(groups) <= 1:
        import torch

        torch.set_num_threads(threads)
        for group in groups:
            on_done(group, run_group(group, options, lambda cells, g=group: on_progress(g, cells)))
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    messages = context.Queue()
    pids: list[int] = []

    def listen() -> None:
        while (item := messages.get()) is not None:
            kind, value, cells = item
            if kind == "pid":
                pids.append(value)
            else:
                on_progress(groups[value], cells)

    listener = threading.Thread(target=listen, name="harness-progress", daemon=True)
    listener.start()
    pool = ProcessPoolExecutor(max_workers=min(workers, len(groups)), mp_context=context,
                               initializer=_start_worker, initargs=(messages, threads, os.getpid()))
    try:
        pending = {pool.submit(_worker_group, i, group, dict(options)): group
                   for i, group in enumerate(groups)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                on_done(pending.pop(future), future.result())
        pool.shutdown()
    except BaseException:
        for pid in pids:  # an interrupted run leaves no worker training on
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        messages.put(None)
        listener.join(timeout=5)


def run_group(group: LocalGroup, options: Mapping[str, Any],
              progress: Callable[[float], None]) -> list[CellResult]:
    """Train and judge one group here: in-process, or in the sandbox for ``sandboxed``
    (where the objective is loaded and run in the sandboxed child only: this process reads
    its text and imports nothing of it)."""
    from harness.contract.registry import suite_at
    from harness.objectives.loading import load_objective

    suite = suite_at(group.suite, group.suite_version)
    if group.sandboxed:
        from pathlib import Path

        from harness.objectives.loading import read_source
        from harness.sandbox import run_cells_sandboxed

        path = Path(group.objective)
        results = run_cells_sandboxed(
            suite, group.source or read_source(path), path.name or "objective.py",
            dict(group.overrides), list(group.variants), list(group.seeds),
            threads=threads_per_worker(), device=options.get("device", "cpu"),
            data_root=options.get("data_root"),
            row_secret=group.row_secret.encode() or None)
        progress(group.cells)
        return results
    objective = load_objective(group.objective, dict(group.overrides) or None)
    return suite.run_cells(objective, list(group.variants), list(group.seeds),
                           progress=progress, **options)


_MESSAGES: Any = None


def _start_worker(messages: Any, threads: int, parent: int) -> None:
    import torch

    global _MESSAGES
    _MESSAGES = messages
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt ends
    _exit_with(parent)
    torch.set_num_threads(threads)
    messages.put(("pid", os.getpid(), 0))


def _worker_group(index: int, group: LocalGroup, options: dict[str, Any]) -> list[CellResult]:
    return run_group(group, options, lambda cells: _MESSAGES.put(("progress", index, cells)))


def _exit_with(parent: int) -> None:
    """End this worker as soon as ``parent`` ends, however it ends (SIGKILL included).

    Its group is discarded then anyway, and an orphan would train on to the end and keep
    the parent's stdout and stderr open (the fork server outlives the parent too: its
    children inherit the write end of the pipe it waits on to see the parent go).
    """
    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:
        os._exit(1)

    def watch() -> None:
        select.select([fd], [], [])  # readable once the parent has exited
        os._exit(1)

    threading.Thread(target=watch, name="harness-parent-watch", daemon=True).start()
