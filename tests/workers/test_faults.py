"""Faults with real processes: Celery workers (`celery -A tasks worker`), a Redis broker and
the PostgreSQL of the tests, with built-in objectives on a shortened noisy-labels suite.

Every cell must land exactly once: one row, status ok, its metrics once, whatever is
killed or restarted mid-run. The tests wait on database state (never fixed sleeps) and
kill at deterministic points (a cell is seen running under the worker about to die).
Cells are as short as that allows: a kill lands within ~0.1 s of the cell being seen
running, so a cell that must be killed mid-run trains ~2.5 s (LONG), the many-cell tests'
~0.5 s (SHORT).

The broker is a private redis-server started here on a free port (database 14), so the
restart test can stop it; workers see pytest-django's test database through
DATABASE_URL. The PostgreSQL restart needs `pg_ctlcluster` (Debian, run as root in CI).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.db.utils import InterfaceError, OperationalError

from harness.contract.registry import suite_at
from harness.objectives.loading import load_objective
from harness.storage import store
from harness.storage.models import Cell, Metric
from tasks import app, dispatch

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
# A group trains its chunk of 5 members (harness/contract/chunks.py) on one thread, ~0.08 s an epoch
# on an idle core (2-3 times that beside the other pytest worker).
LONG = "1.0+e30"  # ~2.5 s: a kill after the cell is seen "running" lands mid-cell
SHORT = "1.0+e5"  # ~0.5 s per cell: the many-cell tests
METRICS = {"clean": 5}  # metrics stored per cell: no noisy labels, no memorization (else 7)
WAIT = 180.0  # seconds any one condition may take on a slow, busy machine

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (scripts/services.sh installs it)",
                allow_module_level=True)


# --- the broker ----------------------------------------------------------------------------


class RedisServer:
    """A throwaway redis-server (no persistence: a restart loses every message)."""

    def __init__(self, directory: Path):
        self.directory = directory
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/14"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until(self.answers, "redis-server to answer", timeout=30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def answers(self) -> bool:
        try:
            return self.client().ping()
        except redis.RedisError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def idle(self, unacked: int = 0) -> bool:
        """No message waiting, and ``unacked`` delivered but unacknowledged (those a killed
        worker held, which Redis hands out again only after the visibility timeout)."""
        c = self.client()
        return c.llen("cpu") == 0 and c.hlen("unacked") == unacked


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


# --- workers -----------------------------------------------------------------------------


def worker_environment(broker: RedisServer, home: Path, **overrides) -> dict[str, str]:
    db = connection.settings_dict
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HARNESS_", "CELERY_")) and k not in (
               "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update({
        "DATABASE_URL": (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}"
                         f":{db['PORT'] or 5432}/{db['NAME']}"),  # the test database
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "HARNESS_HOME": str(home),
        "HARNESS_BROKER_URL": broker.url,
        "C_FORCE_ROOT": "1",
        "HARNESS_TORCH_THREADS": "1",  # two workers on two cores
        "HARNESS_HEARTBEAT_INTERVAL": "0.5",
        "HARNESS_HEARTBEAT_TIMEOUT": "5",
        "HARNESS_REAP_INTERVAL": "1",
        "HARNESS_REQUEUE_AFTER": "3",
        "HARNESS_MAX_ATTEMPTS": "50",  # the tests count attempts; nothing gives up
    })
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class Workers:
    """`celery -A tasks worker` processes by node name, with their logs for failures."""

    def __init__(self, broker: RedisServer, directory: Path):
        self.broker, self.directory = broker, directory
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs: list[Path] = []
        self.log_of: dict[str, Path] = {}

    def start(self, name: str, wait: bool = True, **env) -> subprocess.Popen:
        """Start worker ``name``; with ``wait``, return once it is ready (else see ready)."""
        log = self.directory / f"{name}-{len(self.logs)}.log"
        self.logs.append(log)
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--queues", "cpu",
             "--concurrency", "1", "--hostname", f"{name}@faults", "--loglevel", "INFO",
             "--without-mingle", "--without-gossip", "--without-heartbeat",
             # A pool process imports torch as it starts: beside the other pytest worker that
             # can take longer than Celery's 4 s, which then kills it and forks another, over
             # and over (tasks/worker.py).
             "--", "worker.proc_alive_timeout=120"],
            cwd=ROOT, env=worker_environment(self.broker, self.directory / "home", **env),
            stdout=log.open("w"), stderr=subprocess.STDOUT)
        self.processes[name], self.log_of[name] = process, log
        if wait:
            self.ready(name)
        return process

    def start_all(self, names: list[str], **env) -> None:
        """Start several workers at once (their start-ups overlap), then wait for all."""
        for name in names:
            self.start(name, wait=False, **env)
        for name in names:
            self.ready(name)

    def ready(self, name: str, pool: bool = False) -> None:
        """Wait until worker ``name`` is ready; with ``pool``, also until its pool process
        has started (imported torch), so that a message it takes runs at once."""
        process, log = self.processes[name], self.log_of[name]
        marks = [f"{name}@faults ready."] + (["torch threads"] if pool else [])
        until(lambda: all(m in log.read_text() for m in marks) or process.poll() is not None,
              f"worker {name} to be ready", report=self.report)
        assert process.poll() is None, self.report()

    def assert_alive(self) -> None:
        for name, process in self.processes.items():
            assert process.poll() is None, f"worker {name} exited\n{self.report()}"

    @contextlib.contextmanager
    def paused(self):
        """SIGSTOP the workers' main processes (consumers and reapers) meanwhile; their pool
        processes go on training."""
        for process in self.processes.values():
            process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            for process in self.processes.values():
                process.send_signal(signal.SIGCONT)

    def kill_main(self, name: str) -> None:
        """SIGKILL the worker's main process (its pool process dies with it: PDEATHSIG)."""
        process = self.processes.pop(name)
        children = child_pids(process.pid)
        process.kill()
        process.wait(timeout=30)
        until(lambda: not any(alive(pid) for pid in children), "the pool process to die")

    def kill_pool_process(self, name: str) -> None:
        """SIGKILL the pool process that runs the task (Celery: "worker lost")."""
        (child,) = child_pids(self.processes[name].pid)
        os.kill(child, signal.SIGKILL)

    def stop_all(self) -> None:
        """SIGKILL every worker and its pool process: the test is over, nothing is left to
        finish (a warm shutdown takes seconds)."""
        for process in self.processes.values():
            for pid in child_pids(process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.kill()
        for process in self.processes.values():
            process.wait(timeout=30)
        self.processes.clear()

    def text(self) -> str:
        return "".join(log.read_text() for log in self.logs if log.exists())

    def report(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in self.logs
                         if log.exists())


@pytest.fixture
def workers(transactional_db, broker, tmp_path):
    broker.client().flushdb()
    pool = Workers(broker, tmp_path)
    yield pool
    pool.stop_all()  # before pytest-django empties the database
    connection.close()


def child_pids(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- waiting on the database -------------------------------------------------------------


def until(condition: Callable[[], object], what: str, timeout: float = WAIT,
          report: Callable[[], str] = lambda: "") -> object:
    """Poll ``condition`` until truthy; a database that is restarting is simply polled again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OperationalError, InterfaceError):
            connection.close()
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                                 f"{report()}")
        time.sleep(0.05)


def cells_for(objectives: list[str], variants: list[str], seeds: list[int],
              suite_version: str) -> list[int]:
    suite = suite_at("noisy-labels", suite_version)
    ids = []
    for name in objectives:
        version = store.version_for(load_objective(name))
        for variant in variants:
            for seed in seeds:
                ids.append(Cell.objects.create(
                    version=version, suite="noisy-labels", suite_version=suite_version,
                    variant=variant, seed=seed,
                    variant_hash=suite.variant(variant).config_hash(suite)).pk)
    return ids


def send(broker: RedisServer, ids: list[int]) -> int:
    with app.connection_for_write(broker.url) as conn:
        return dispatch.enqueue_cells(Cell.objects.filter(pk__in=ids), connection=conn)


def all_finished(ids: list[int]) -> bool:
    return Cell.objects.filter(pk__in=ids, status__in=Cell.FINISHED).count() == len(ids)


def running_under(ids: list[int], worker: str) -> Cell | None:
    return Cell.objects.filter(pk__in=ids, status=Cell.RUNNING, worker=f"{worker}@faults").first()


def assert_stored_once(ids: list[int], workers: Workers) -> dict[int, Cell]:
    cells = {c.pk: c for c in Cell.objects.filter(pk__in=ids)}
    assert len(cells) == len(ids) == Cell.objects.count()
    bad = {pk: (c.status, c.reason, c.error[:200]) for pk, c in cells.items()
           if c.status != Cell.OK}
    assert not bad, f"cells not ok: {bad}\n{workers.report()}"
    counts = {pk: Metric.objects.filter(cell_id=pk).count() for pk in ids}
    assert counts == {pk: METRICS.get(c.variant, 7) for pk, c in cells.items()}
    return cells


def metric_ids(ids: list[int]) -> set[int]:
    return set(Metric.objects.filter(cell_id__in=ids).values_list("pk", flat=True))


# --- the tests -----------------------------------------------------------------------------


def test_a_killed_pool_process_is_redelivered_and_stored_once(workers, broker):
    ids = cells_for(["ce"], ["sym-0.4"], [0], LONG)
    assert send(broker, ids) == 1  # before the worker starts: its reaper sends unsent cells
    workers.start("a")
    until(lambda: running_under(ids, "a"), "the cell to run on a", report=workers.report)
    workers.kill_pool_process("a")  # mid-cell: it trains for seconds more
    until(lambda: all_finished(ids), "the cell to land", report=workers.report)
    cells = assert_stored_once(ids, workers)
    assert cells[ids[0]].attempts == 2  # the pool process was replaced and ran it again
    assert f"pool process lost; cells {ids} queued again" in workers.text()


def test_a_killed_worker_is_redelivered_by_redis_to_another_worker(workers, broker):
    """The whole worker dies: its message stays unacknowledged in Redis until the
    visibility timeout, then Redis hands it to the other worker, which takes the cell
    once its heartbeat is stale. The reapers are off: redelivery alone does it."""
    # Redelivered 5 s after a took it (killed well within: its pool process was up), when
    # a's heartbeat is 2 s stale; nobody reaps a beat that is late while a still runs.
    quick = {"HARNESS_VISIBILITY_TIMEOUT": 5, "HARNESS_REAP_INTERVAL": 0,
             "HARNESS_HEARTBEAT_TIMEOUT": 2}
    workers.start("a", wait=False, **quick)
    workers.ready("a", pool=True)  # the message runs at once: killed well within visibility
    ids = cells_for(["ce"], ["sym-0.4"], [0], LONG)
    send(broker, ids)
    until(lambda: running_under(ids, "a"), "the cell to run on a", report=workers.report)
    workers.kill_main("a")
    assert broker.client().hlen("unacked") == 1  # the message a held, not acknowledged
    workers.start("b", **quick)
    until(lambda: all_finished(ids), "the cell to land on b", report=workers.report)
    cells = assert_stored_once(ids, workers)
    assert (cells[ids[0]].attempts, cells[ids[0]].worker) == (2, "b@faults")
    until(broker.idle, "the redelivered message to be acknowledged")


def test_a_killed_worker_is_reaped_and_a_restarted_one_requeues_its_own(workers, broker):
    """Two ways back without Redis's (one hour) redelivery: another worker's reaper once
    the heartbeat is stale, and a worker restarted under the same name at once."""
    workers.start("a")
    first = cells_for(["ce"], ["sym-0.4"], [0], LONG)
    send(broker, first)
    until(lambda: running_under(first, "a"), "the first cell to run on a",
          report=workers.report)
    workers.kill_main("a")
    workers.start("b")  # its reaper finds the stale heartbeat and sends the cell again
    until(lambda: all_finished(first), "the first cell to land on b", report=workers.report)
    assert Cell.objects.get(pk=first[0]).worker == "b@faults"

    second = cells_for(["gce"], ["sym-0.4"], [0], LONG)  # queued cells are soon sent anyway
    send(broker, second)
    until(lambda: running_under(second, "b"), "the second cell to run on b",
          report=workers.report)
    workers.kill_main("b")
    started = time.monotonic()
    workers.start("b")  # the same node name: what it held is queued again at start
    until(lambda: all_finished(second), "the second cell to land", report=workers.report)
    assert time.monotonic() - started < 60
    cells = assert_stored_once(first + second, workers)
    assert all(c.attempts == 2 for c in cells.values())


def test_a_redis_restart_mid_run_loses_messages_and_every_cell_still_lands(workers, broker):
    ids = cells_for(["ce", "gce"], ["clean", "sym-0.4", "asym-0.4"], [0, 1], SHORT)
    assert send(broker, ids) == 6  # before the workers start: their reapers send unsent cells
    workers.start_all(["a", "b"])  # together: neither drains the queue alone meanwhile
    until(lambda: Cell.objects.filter(pk__in=ids, status=Cell.RUNNING).exists()
          and broker.client().llen("cpu") > 0, "cells running with messages still waiting",
          report=workers.report)
    with workers.paused():  # no reaper sends the lost cells again before the loss is seen
        broker.stop()  # no persistence: the waiting messages are gone
        broker.start()
        assert broker.client().llen("cpu") == 0
    until(lambda: all_finished(ids), "every cell to land after the restart",
          report=workers.report)
    assert_stored_once(ids, workers)


@pytest.mark.serial  # restarts the PostgreSQL every worker uses
def test_a_postgres_restart_mid_run_is_retried_and_every_cell_lands(workers, broker):
    versions = sorted(os.listdir("/usr/lib/postgresql")) if os.path.isdir(
        "/usr/lib/postgresql") else []
    if shutil.which("pg_ctlcluster") is None or not versions or os.geteuid() != 0:
        pytest.skip("needs Debian's pg_ctlcluster as root (CI)")
    version = max(versions, key=lambda v: [int(p) for p in v.split(".") if p.isdigit()])
    workers.start_all(["a", "b"])
    ids = cells_for(["ce", "gce"], ["clean", "sym-0.4", "asym-0.4"], [0, 1], SHORT)
    send(broker, ids)
    until(lambda: Cell.objects.filter(pk__in=ids, status=Cell.RUNNING).exists(),
          "a cell to run", report=workers.report)
    connection.close()
    subprocess.run(["pg_ctlcluster", version, "main", "restart"], check=True, timeout=120)
    until(lambda: all_finished(ids), "every cell to land after the restart",
          report=workers.report)
    assert_stored_once(ids, workers)
    # the workers did lose the database (a reaper round may say so only after the last
    # of these quick cells landed)
    until(lambda: "OperationalError" in workers.text(), "the workers to report the restart",
          report=workers.report)


# A killed worker's cells go back after 3 s without a heartbeat (beats every 0.5 s).
FIFTY = {"HARNESS_HEARTBEAT_TIMEOUT": 3}


def test_fifty_cells_under_random_worker_kills_each_land_exactly_once(workers, broker):
    rng = random.Random(20261130)
    objectives = ["ce", "gce", "mae", "sce", "focal"]
    ids = cells_for(objectives, ["clean", "sym-0.2", "sym-0.4", "asym-0.2", "asym-0.4"],
                    [0, 1], SHORT)
    # sent before the workers start: a running worker's reaper sends never-sent queued
    # cells itself, and could take some of these before this send does
    assert len(ids) == 50 and send(broker, ids) == 25
    workers.start_all(["w0", "w1"], **FIFTY)
    kills, restarts = 0, 0
    while kills < 6 and not all_finished(ids):
        name = rng.choice(sorted(workers.processes))

        def victim(n=name):
            workers.assert_alive()  # a restarted worker that died is a failure, not a wait
            return running_under(ids, n) or all_finished(ids)

        cell = until(victim, f"a cell to run on {name}", report=workers.report)
        if cell is True:
            break
        if rng.random() < 0.5:
            workers.kill_pool_process(name)
        else:
            workers.kill_main(name)
            restarts += 1  # again under the same name, or a new one (the reaper's case)
            # not waited for: the next kill comes while it starts, so that the kills do
            # not wait on start-ups while the other worker finishes the cells
            workers.start(name if rng.random() < 0.5 else f"w{restarts + 1}", wait=False,
                          **FIFTY)
        kills += 1
        until(lambda c=cell: not Cell.objects.filter(pk=c.pk, status=Cell.RUNNING,
                                                     attempts=c.attempts).exists(),
              "the killed attempt to be given up", report=workers.report)
    until(lambda: all_finished(ids), "all fifty cells to land", report=workers.report)
    cells = assert_stored_once(ids, workers)
    assert kills >= 3 and sum(c.attempts for c in cells.values()) > 50

    # Every message, sent again, finds its cells finished: nothing is stored twice.
    stored = {pk: c.finished_at for pk, c in cells.items()}
    before = metric_ids(ids)
    assert send(broker, ids) == 0  # no queued cell: dispatch sends nothing ...
    orphans = broker.client().hlen("unacked")  # messages of killed workers
    with app.connection_for_write(broker.url) as conn:  # ... so duplicate every group
        for group in dispatch.groups(Cell.objects.filter(pk__in=ids)):
            dispatch.send(group, connection=conn)
    until(lambda: broker.idle(orphans), "the duplicates to be consumed",
          report=workers.report)
    assert {c.pk: c.finished_at for c in Cell.objects.filter(pk__in=ids)} == stored
    assert metric_ids(ids) == before and Cell.objects.count() == 50
