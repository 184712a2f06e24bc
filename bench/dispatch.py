"""What the worker path costs on top of a cell group's training, and how to lay out workers.

One run measures, on this machine, for a noisy-label cell group (one submitted
objective, one variant, ``--seeds`` seeds, the suite's full 100 epochs):

1. **Overhead.** The same group trained (a) in-process (the compute alone), (b) with
   its loss served from the sandbox as a traced graph (one trace per group, then no
   round trip per step), (c) served per call (the same GCE asking for ``progress``,
   which keeps it from being traced: one round trip per step to every member's
   server), (d) per call with servers exec'd as fresh interpreters (the naive launch),
   and (e) end to end through a real Celery worker: broker, claim, sandbox, judge,
   store. Repeats are interleaved; medians. Target: (e) within 5% of (a).
2. **Layout.** ``--groups`` groups through 1 worker × 2 torch threads and through 2
   workers × 1 thread each; wall time to the last stored cell. Target: neither
   slower than 0.9× the other.

Needs PostgreSQL and Redis (``bash scripts/services.sh``); uses the databases named by
``--database`` (created and migrated if missing) and ``--broker`` (flushed).

    .venv/bin/python bench/dispatch.py [--seeds 5] [--repeats 3] [--groups 6]

``--smoke`` (the test suite's) runs every path once on the smallest job and measures
nothing: one worker, started once, serves the worker path and both layouts' rows,
nothing is warmed up, and the in-process and sandbox paths train member chunks of the
seeds asked for (2), not the suite's 5 (the exec path starts one interpreter a member).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.runner.inprocess import run_cells

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITE = "noisy-labels"
VARIANTS = ["sym-0.4", "sym-0.2", "sym-0.6", "asym-0.2", "asym-0.4", "clean", "idn-0.4"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=0, help="0: the suite's own")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--database",
                        default="postgres://harness:harness@127.0.0.1:5432/harness_dispatch")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny run: 2 seeds, 1 epoch, 1 repeat, 1 group, one worker "
                             "for every path, no warm-up")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.epochs, args.repeats, args.groups = 2, 1, 1, 1
        args.database += "_smoke"
    env = _environment(args)
    os.environ.update(env)
    _create_database(args.database)

    import django

    django.setup()
    import torch
    from django.core.management import call_command

    torch.set_num_threads(1)  # the compute baseline gets what one worker thread gets
    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(args.broker).flushdb()

    from harness.contract.registry import get_suite

    suite = get_suite(SUITE)
    if args.epochs:
        suite = suite.shortened(args.epochs)
    seeds = list(range(args.seeds))
    code = (ROOT / "harness/objectives/builtin/gce.py").read_text()  # the engine's built-in
    print(f"{SUITE} v{suite.version}, one group = 1 variant × {len(seeds)} seeds, "
          f"torch {torch.__version__}, {os.cpu_count()} cores")
    # A smoke starts its one worker first: it comes up while the in-process paths run.
    shared = Workers(env, count=1, threads=1) if args.smoke else None
    here = dataclasses.replace(suite, chunk=len(seeds)) if args.smoke else suite
    try:
        overhead(here, code, seeds, args.repeats, env, shared)
        layouts(suite, code, seeds, args.groups, env, shared)
    finally:
        if shared:
            shared.stop()


# --- 1. overhead ---------------------------------------------------------------------------


def overhead(suite, code: str, seeds: list[int], repeats: int, env: dict,
             shared: Workers | None = None) -> None:
    """``shared``: the smoke's worker, already started (then nothing is warmed up)."""
    from harness.objectives.loading import load_objective
    from harness.runner.sandboxed import run_cells_sandboxed

    # The same loss, asking for a number it does not use: a number in the context keeps a
    # hook from being traced, so this one is served per call.
    per_call = code.replace("*, q: float = 0.7", "*, q: float = 0.7, progress: float")
    assert per_call != code
    variant = VARIANTS[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submitted_gce.py"
        path.write_text(code)
        objective = load_objective(str(path))

        def in_process() -> None:
            _check(run_cells(suite, objective, [variant], seeds))

        def sandbox_traced() -> None:
            _check(run_cells_sandboxed(suite, code, "submitted_gce.py", {}, [variant], seeds),
                   served="graph")

        def sandbox_per_call() -> None:
            _check(run_cells_sandboxed(suite, per_call, "submitted_gce.py", {}, [variant],
                                       seeds), served="per call")

        def sandbox_exec() -> None:
            os.environ["HARNESS_SANDBOX_MODE"] = "exec"
            try:
                sandbox_per_call()
            finally:
                os.environ["HARNESS_SANDBOX_MODE"] = "fork"

        workers = shared or Workers(env, count=1, threads=1)
        try:
            worker_path = lambda: run_groups(suite, code, [variant], seeds)  # noqa: E731
            if not shared:
                worker_path()  # warm-up: worker start, fork server start, imports
                sandbox_traced()
            paths = (("in-process", in_process), ("sandbox traced", sandbox_traced),
                     ("sandbox per call", sandbox_per_call),
                     ("per call (exec)", sandbox_exec), ("worker", worker_path))
            times: dict[str, list[float]] = {name: [] for name, _ in paths}
            for _ in range(repeats):
                for name, fn in paths:
                    start = time.perf_counter()
                    took = fn()
                    times[name].append(took if isinstance(took, float)
                                       else time.perf_counter() - start)
        finally:
            if not shared:
                workers.stop()
    base = statistics.median(times["in-process"])
    print(f"\n1. per-group overhead (median of {repeats}; ratio to the in-process compute)")
    print(f"{'path':<16} {'median s':>9} {'ratio':>7}  all runs")
    for name, values in times.items():
        m = statistics.median(values)
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:<16} {m:9.2f} {m / base:7.3f}  {runs}")
    worker = statistics.median(times["worker"])
    print(f"worker path overhead: {100 * (worker / base - 1):+.1f}% of the group's compute "
          f"({worker - base:+.2f} s per group of {len(seeds)} cells; target ≤ +5%)")


# --- 2. layouts ------------------------------------------------------------------------------


def layouts(suite, code: str, seeds: list[int], groups: int, env: dict,
            shared: Workers | None = None) -> None:
    """``shared``: the smoke's one worker runs both rows, so they are not the layouts their
    labels say (a smoke measures nothing)."""
    variants = (VARIANTS * (groups // len(VARIANTS) + 1))[:groups]
    print(f"\n2. throughput: {groups} groups × {len(seeds)} seeds, to the last stored cell")
    results = {}
    for label, count, threads in (("1 worker × 2 threads", 1, 2),
                                  ("2 workers × 1 thread", 2, 1)):
        workers = shared or Workers(env, count=count, threads=threads)
        try:
            if not shared:
                run_groups(suite, code, VARIANTS[:count], seeds[:1])  # warm every worker
            took = run_groups(suite, code, variants, seeds, distinct=True)
        finally:
            if not shared:
                workers.stop()
        results[label] = took
        cells = groups * len(seeds)
        print(f"{label:<22} {took:7.1f} s   {60 * cells / took:6.1f} cells/min")
    a, b = results.values()
    print(f"ratio (2 workers × 1 thread) / (1 worker × 2 threads) throughput: {a / b:.2f}× "
          f"(target: both within 0.9×–1.1×)")


def run_groups(suite, code: str, variants: list[str], seeds: list[int],
               distinct: bool = False) -> float:
    """Submit one fresh objective version's cells and wait until all are stored; seconds
    from enqueue to the last cell's finish."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission
    from tasks.dispatch import enqueue

    user, _ = User.objects.get_or_create(username="bench")
    tag = uuid.uuid4().hex[:12]
    obj = Objective.objects.create(slug=f"bench-{tag}", name=f"bench {tag}", owner=user)
    version = ObjectiveVersion.objects.create(objective=obj, code=code, code_sha256=tag,
                                              hyperparameters={}, key=tag, label=obj.name)
    submission = Submission.objects.create(owner=user, version=version, suites=[SUITE],
                                           seeds=len(seeds))
    cells = [Cell.objects.create(version=version, suite=SUITE, suite_version=suite.version,
                                 variant=v, variant_hash="", seed=s)
             for v in variants for s in seeds]
    submission.cells.set(cells)
    start = timezone.now()
    enqueue(submission)
    deadline = time.monotonic() + 1800
    while Cell.objects.filter(pk__in=[c.pk for c in cells],
                              status__in=Cell.FINISHED).count() < len(cells):
        if time.monotonic() > deadline:
            raise TimeoutError("cells did not finish within 30 minutes")
        time.sleep(0.05)
    finished = Cell.objects.filter(pk__in=[c.pk for c in cells])
    bad = finished.exclude(status=Cell.OK).values_list("status", "reason", "error")[:1]
    if bad:
        raise RuntimeError(f"a benchmark cell did not succeed: {list(bad)}")
    last = max(finished.values_list("finished_at", flat=True))
    return (last - start).total_seconds()


def _check(results, served: str = "") -> None:
    bad = [r for r in results if r.status != "ok"]
    if bad:
        raise RuntimeError(f"a benchmark cell did not succeed: {bad[0].status} {bad[0].error}")
    how = results[0].info.get("sandbox", {}).get("served", {}).get("classification_loss", "")
    if served and not how.startswith(served):
        raise RuntimeError(f"the hook was served {how!r}, not {served!r}")


class Workers:
    """``count`` real Celery workers, one pool process each, ``threads`` torch threads each."""

    def __init__(self, env: dict, count: int, threads: int) -> None:
        self.procs = []
        for i in range(count):
            worker_env = {**os.environ, **env, "HARNESS_TORCH_THREADS": str(threads),
                          "C_FORCE_ROOT": "1"}
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-Q", "cpu",
                 "--concurrency", "1", "--hostname", f"bench{i}-{uuid.uuid4().hex[:6]}@%h",
                 "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
                cwd=ROOT, env=worker_env, stdout=subprocess.DEVNULL))

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _environment(args) -> dict[str, str]:
    return {"DATABASE_URL": args.database, "HARNESS_BROKER_URL": args.broker,
            "DJANGO_SETTINGS_MODULE": "webapp.settings", "HARNESS_EXECUTOR": "none",
            "HARNESS_REAP_INTERVAL": "0"}


def _create_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
