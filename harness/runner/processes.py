"""Local runs over the machine's cores: one process per core, one cell group each at a time.

A *group* is the cells of one objective that train together as one seed-batched run
(some of a suite's variants × seeds). For the suites' small models, two one-thread
processes each batching some members beat one two-thread process (``bench/dispatch.py``,
``bench/seed_batching.py``), so ``harness run`` spreads its groups over worker processes
as the Celery workers do. Workers train and judge; the parent stores (one writer).

Workers are forked from a fork server that has torch imported, with one torch thread
each, so numbers never depend on how many run at once. With one worker, or one group,
everything runs in this process. A run's workers share the work their groups have in common
(:mod:`harness.contract.memo`) through a private directory that lives as long as the run.
"""

from __future__ import annotations

import ast
import contextlib
import multiprocessing
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from pathlib import Path
from typing import Any

from harness.contract.suite import CellResult
from harness.runner.group import Group, run_group

PRELOAD = ["torch", "numpy", "harness.train", "harness.contract.registry"]


def default_workers() -> int:
    """One worker per core this process may use (``HARNESS_WORKERS`` overrides)."""
    value = os.environ.get("HARNESS_WORKERS")
    return max(1, int(value)) if value else len(os.sched_getaffinity(0))


def threads_per_worker() -> int:
    """Torch threads of each worker: 1 (``HARNESS_THREADS`` overrides): per-member loops
    round differently with more threads, and processes beat threads here anyway."""
    value = os.environ.get("HARNESS_THREADS")
    return max(1, int(value)) if value else 1


def workers_for_caller(workers: int, say: Callable[[str], None]) -> int:
    """``workers``, or 1 (and why, to ``say``) when the caller is a script's unguarded top
    level (:func:`unguarded_main_call`): the run then stays in this process."""
    script = unguarded_main_call() if workers > 1 else None
    if script is None:
        return workers
    say(f"{script} calls the harness at its top level, outside `if __name__ == "
        f"\"__main__\":`, and worker processes re-run the script when they start (each "
        f"would start this run again): this run stays in this process, on one core. Put "
        f"the call under that `if` to use every core.")
    return 1


def unguarded_main_call() -> str | None:
    """The script's path when the harness is called from its top level outside an ``if
    __name__ == "__main__":`` block, else None. Worker processes start by re-running the
    parent's ``__main__`` (multiprocessing's forkserver re-imports it by path or module
    name), so such a script would start the same run again in every worker, which dies
    (``BrokenProcessPool``). A notebook or an interactive session has no such file."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame = sys._getframe(1)
    while path and frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            return None if _guarded(path, frame.f_lineno) else path
        frame = frame.f_back
    return None


def _guarded(path: str, line: int) -> bool:
    """Whether ``line`` of the file lies in an ``if __name__ == "__main__":`` block (a file
    that cannot be read or parsed counts as guarded: nothing to say about it)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.lineno <= line <= (node.end_lineno or line):
            test = node.test
            sides = [test.left, *test.comparators] if isinstance(test, ast.Compare) else []
            if {"__name__", "__main__"} <= {getattr(x, "id", getattr(x, "value", None))
                                            for x in sides}:
                return True
    return False


def run_groups(groups: list[Group], *, workers: int, options: Mapping[str, Any],
               on_progress: Callable[[Group, float], None],
               on_done: Callable[[Group, list[CellResult]], None]) -> None:
    """Run every group; ``on_done`` (in this process, as each finishes) receives its results
    and ``on_progress`` the cells done since the last call. Ctrl-C kills the workers: groups
    already done stay done, the others are discarded whole."""
    threads = threads_per_worker()
    if workers <= 1 or len(groups) <= 1:
        import torch

        torch.set_num_threads(threads)
        for group in groups:
            on_done(group, run_group(group, threads=threads, progress=lambda cells, g=group:
                                           on_progress(g, cells), **options))
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    messages = context.Queue()
    pids: list[int] = []
    memo = tempfile.mkdtemp(prefix="harness-run-")  # the groups' shared work (contract.memo)

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
                               initializer=_start_worker,
                               initargs=(messages, threads, os.getpid(), memo))
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
        shutil.rmtree(memo, ignore_errors=True)


def map_in_workers(fn: Callable[..., Any], calls: list[tuple], *, workers: int,
                   on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(*args) for args in calls]`` over up to ``workers`` one-thread processes forked
    like the trainers (``fn`` must be importable by name). Ctrl-C kills them all.
    ``on_result(i, result)`` is called here as each call ends, so a caller can keep what
    finished before an interrupt."""
    threads = threads_per_worker()
    if workers <= 1 or len(calls) <= 1:
        results = []
        for i, args in enumerate(calls):
            results.append(fn(*args))
            if on_result is not None:
                on_result(i, results[-1])
        return results
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    messages = context.Queue()
    pool = ProcessPoolExecutor(max_workers=min(workers, len(calls)), mp_context=context,
                               initializer=_start_worker, initargs=(messages, threads, os.getpid()))
    try:
        futures = [pool.submit(fn, *args) for args in calls]
        if on_result is not None:
            index = {f: i for i, f in enumerate(futures)}
            for done in as_completed(futures):
                on_result(index[done], done.result())
        results = [f.result() for f in futures]
        pool.shutdown()
        return results
    except BaseException:
        while not messages.empty():
            kind, pid, _ = messages.get_nowait()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pool.shutdown(wait=False, cancel_futures=True)
        raise


_MESSAGES: Any = None


def _start_worker(messages: Any, threads: int, parent: int, memo: str = "") -> None:
    import torch

    from harness.contract import memo as shared

    global _MESSAGES
    _MESSAGES = messages
    if memo:
        os.environ[shared.ENV] = memo
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt ends
    _exit_with(parent)
    torch.set_num_threads(threads)
    messages.put(("pid", os.getpid(), 0))


def _worker_group(index: int, group: Group, options: dict[str, Any]) -> list[CellResult]:
    return run_group(group, threads=threads_per_worker(),
                     progress=lambda cells: _MESSAGES.put(("progress", index, cells)), **options)


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
