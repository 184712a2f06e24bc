"""Over 500 lines on purpose: a cell's whole lifecycle, read top to bottom.

Celery tasks, dispatch and the cell lifecycle, without a broker (the fault tests in
tests/workers/test_faults.py run real workers): routing, grouping, time limits, claims and
their fences, retries only for infrastructure, the reaper, and eager end-to-end runs of
a built-in objective on the real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from billiard.exceptions import TimeLimitExceeded, WorkerLostError
from celery.exceptions import SoftTimeLimitExceeded
from django.contrib.auth.models import User
from django.db import OperationalError
from django.db.models import Q
from django.test import Client
from django.utils import timezone

import tasks
from harness.contract import registry
from harness.contract.registry import get_suite
from harness.contract.suite import CellResult, Resources
from harness.objectives.loading import load_objective
from harness.storage import store
from harness.storage.models import Cell, Submission
from tasks import dispatch, limits, reaper
from tasks import tasks as task_module
from tasks.worker import NODE, default_threads
from webapp.execution import executors, heartbeat, status
from webapp.execution import groups as work

pytestmark = pytest.mark.django_db

SUITE = get_suite("noisy-labels")
SHORT = "1.0+e1"  # one epoch: cells train in about a second


@pytest.fixture
def version():
    return store.version_for(load_objective("ce"))


def make_cells(version, variants=("clean",), seeds=(0, 1), suite_version=SHORT, **fields):
    suite = registry.suite_at("noisy-labels", suite_version)
    return [Cell.objects.create(version=version, suite="noisy-labels",
                                suite_version=suite_version, variant=v, seed=s,
                                variant_hash=suite.variant(v).config_hash(suite), **fields)
            for v in variants for s in seeds]


def group_of(cells) -> work.QueuedGroup:
    (group,) = work.groups(Cell.objects.filter(pk__in=[c.pk for c in cells]))
    return group


def fresh(cells) -> list[Cell]:
    return list(Cell.objects.filter(pk__in=[c.pk for c in cells]).order_by("pk"))


@pytest.fixture
def sent(monkeypatch):
    """Messages dispatch would send: (args, options) per apply_async call."""
    calls = []
    monkeypatch.setattr(task_module.run_queued_group, "apply_async",
                        lambda args, connection=None, **options: calls.append((args, options)))
    return calls


@pytest.fixture
def eager():
    conf = tasks.app.conf
    before = conf.task_always_eager, conf.task_eager_propagates
    # Not propagating: an eager retry runs inside the first try and must not raise out of it.
    conf.task_always_eager, conf.task_eager_propagates = True, False
    yield
    conf.task_always_eager, conf.task_eager_propagates = before


def run_task(cells, **kwargs):
    group = group_of(cells)
    (variant,) = group.variants
    result = task_module.run_queued_group.apply(
        args=[group.version_id, group.suite, group.suite_version, variant, list(group.seeds)],
        kwargs=kwargs, throw=False)  # retries run eagerly, one inside the other
    assert result.successful(), result.traceback
    return result.get()


# --- the app's configuration -------------------------------------------------------------


def test_app_is_configured_for_reliable_delivery():
    conf = tasks.app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1 and conf.task_ignore_result
    assert [q.name for q in conf.task_queues] == ["cpu", "gpu"]
    if not conf.broker_url.startswith("filesystem:"):  # events for Flower on a real broker
        assert conf.worker_send_task_events and conf.task_send_sent_event
    task = task_module.run_queued_group
    assert task.acks_late and task.reject_on_worker_lost
    visibility = conf.harness_visibility_timeout
    suites = [get_suite("noisy-labels"), get_suite("certified")]
    assert visibility >= limits.longest_hard_limit(suites) + limits.VISIBILITY_MARGIN


def test_broker_defaults_to_the_embedded_filesystem_transport(settings, tmp_path):
    from tasks.celery import config

    settings.CELERY_BROKER_URL = "filesystem://"
    settings.BROKER_DIR = tmp_path / "broker"
    conf = config()
    options = conf["broker_transport_options"]
    assert conf["broker_url"] == "filesystem://"
    assert options["data_folder_in"] == options["data_folder_out"] == str(settings.BROKER_DIR)
    assert options["polling_interval"] <= 0.2 and settings.BROKER_DIR.is_dir()
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.HARNESS_VISIBILITY_TIMEOUT = 40.0
    options = config()["broker_transport_options"]
    assert options["visibility_timeout"] == 40.0 and options["unacked_restore_interval"] == 2


def test_pool_threads_share_the_cores_between_pool_processes(monkeypatch):
    assert default_threads(1, cores=2) == 2
    assert default_threads(2, cores=2) == 1
    assert default_threads(4, cores=2) == 1  # at least one
    assert default_threads(2, cores=16) == 8
    monkeypatch.setenv("HARNESS_TORCH_THREADS", "3")
    from tasks.worker import pool_threads

    assert pool_threads() == 3


# --- routing, grouping and time limits ---------------------------------------------------------


def test_gpu_variants_go_to_the_gpu_queue_and_digits_to_cpu(version, sent):
    cpu = work.QueuedGroup(version.pk, "noisy-labels", "1.0", ("clean",), (0, 1))
    gpu = work.QueuedGroup(version.pk, "noisy-labels", "1.0", ("mnist/sym-0.4",), (0,))
    assert dispatch.route(cpu)["queue"] == "cpu"
    assert dispatch.route(gpu)["queue"] == "gpu"
    make_cells(version, variants=("clean", "mnist/sym-0.4"), seeds=(0,), suite_version="1.0")
    assert dispatch.enqueue_cells(Cell.objects.all()) == 2
    assert sorted((args[3], options["queue"]) for args, options in sent) == [
        ("clean", "cpu"), ("mnist/sym-0.4", "gpu")]


def test_time_limits_come_from_the_suite_resources(monkeypatch, version):
    monkeypatch.delenv("HARNESS_TIME_SCALE", raising=False)
    monkeypatch.delenv("HARNESS_TIME_MARGIN", raising=False)
    wall = SUITE.resources.wall_seconds(3)
    assert wall == 120 + 10 * 3
    assert limits.time_limits(SUITE.resources, 3) == (wall + 30, wall + 60)
    route = dispatch.route(work.QueuedGroup(version.pk, "noisy-labels", "1.0", ("clean",),
                                        (0, 1, 2)))
    whole = SUITE.resources.wall_seconds(5)  # 3 seeds train their whole chunk of 5
    assert (route["soft_time_limit"], route["time_limit"]) == (whole + 30, whole + 60)
    monkeypatch.setenv("HARNESS_TIME_SCALE", "2")
    monkeypatch.setenv("HARNESS_TIME_MARGIN", "5")
    assert limits.time_limits(SUITE.resources, 3) == (2 * wall + 5, 2 * wall + 10)
    certified = get_suite("certified")
    assert limits.time_limits(certified.resources, 1)[0] == 2 * (300 + 120) + 5


def test_a_group_too_long_for_the_visibility_timeout_is_split():
    suite = SUITE.shortened(1)
    object.__setattr__(suite, "resources", Resources(base_seconds=10, seconds_per_member=100))
    # hard(n) = 10 + 100 n + 60; visibility 400 leaves 340: chunks of at most 2 seeds
    assert limits.seed_chunks(suite.resources, [0, 1, 2, 3, 4], 400) == [[0, 1], [2, 3], [4]]
    assert limits.seed_chunks(suite.resources, [0, 1, 2], 10_000) == [[0, 1, 2]]
    assert limits.seed_chunks(suite.resources, [0, 1], 50) == [[0], [1]]  # never below one seed
    # in whole member chunks: 10 seeds in chunks of 5 (hard(5) = 570, hard(10) = 1070)
    ten = list(range(10))
    assert limits.seed_chunks(suite.resources, ten, 700, chunk=5) == [ten[:5], ten[5:]]
    assert limits.seed_chunks(suite.resources, ten, 50, chunk=5) == [ten[:5], ten[5:]]
    assert limits.seed_chunks(suite.resources, ten, 2000, chunk=5) == [ten]
    assert limits.seed_chunks(suite.resources, [1, 7], 700, chunk=5) == [[1], [7]]


def test_groups_are_one_variant_with_its_seeds_or_merged_by_seed_set(version):
    make_cells(version, variants=("clean", "sym-0.4"), seeds=(0, 1))
    make_cells(version, variants=("asym-0.4",), seeds=(0,))
    cells = Cell.objects.all()
    assert work.groups(cells) == [
        work.QueuedGroup(version.pk, "noisy-labels", SHORT, ("asym-0.4",), (0,)),
        work.QueuedGroup(version.pk, "noisy-labels", SHORT, ("clean",), (0, 1)),
        work.QueuedGroup(version.pk, "noisy-labels", SHORT, ("sym-0.4",), (0, 1))]
    assert work.groups(cells, per_variant=False) == [
        work.QueuedGroup(version.pk, "noisy-labels", SHORT, ("asym-0.4",), (0,)),
        work.QueuedGroup(version.pk, "noisy-labels", SHORT, ("clean", "sym-0.4"), (0, 1))]


def test_enqueue_sends_each_queued_group_once_and_stamps_it(version, sent, client):
    user = User.objects.create_user("dora")
    cells = make_cells(version, variants=("clean", "sym-0.4"), seeds=(0, 1, 2))
    Cell.objects.filter(pk=cells[0].pk).update(status=Cell.OK)  # finished: not sent
    submission = Submission.objects.create(owner=user, version=version, suites=["noisy-labels"])
    submission.cells.set(cells)
    assert dispatch.enqueue(submission) == 2
    assert sorted(args[3:] for args, _ in sent) == [["clean", [1, 2]], ["sym-0.4", [0, 1, 2]]]
    assert not Cell.objects.filter(status=Cell.QUEUED, enqueued_at__isnull=True).exists()


def test_a_broker_that_cannot_be_reached_leaves_the_cells_for_the_reaper(version, monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(task_module.run_queued_group, "apply_async", down)
    make_cells(version)
    assert dispatch.enqueue_cells(Cell.objects.all()) == 0  # logged, not raised
    assert set(Cell.objects.values_list("status", "enqueued_at")) == {(Cell.QUEUED, None)}


# --- claims: a cell runs under one claim and is stored once ------------------------------------


def test_claim_takes_queued_cells_once_and_skips_finished_ones(version):
    cells = make_cells(version, seeds=(0, 1, 2))
    Cell.objects.filter(pk=cells[2].pk).update(status=Cell.OK, attempts=1)
    ids = [c.pk for c in cells]
    claim = store.claim(ids, worker="w1")
    assert claim == {cells[0].pk: 1, cells[1].pk: 1}
    assert store.claim(ids, worker="w2") == {}  # held with a fresh heartbeat
    first = fresh(cells)[0]
    assert (first.status, first.worker, first.attempts) == (Cell.RUNNING, "w1", 1)
    assert first.heartbeat_at is not None and first.started_at is not None


def test_a_stale_heartbeat_lets_another_worker_take_over_and_fences_the_first(version):
    cells = make_cells(version, seeds=(0,))
    old = store.claim([cells[0].pk], worker="w1")
    Cell.objects.update(heartbeat_at=timezone.now() - timedelta(hours=1))
    new = store.claim([cells[0].pk], worker="w2")
    assert new == {cells[0].pk: 2}
    result = CellResult("clean", 0, "ok", metrics={"test_acc": 0.5})
    suite = registry.suite_at("noisy-labels", SHORT)
    assert store.heartbeat(old) == 0  # the first worker learns it lost the cell
    assert store.store_results(version, suite, [result], {}, claim=old) == 0
    assert store.store_results(version, suite, [result], {}, claim=new) == 1
    assert store.store_results(version, suite, [result], {}, claim=new) == 0  # stored once
    cell = fresh(cells)[0]
    assert (cell.status, cell.attempts, cell.worker) == (Cell.OK, 2, "w2")
    assert cell.metrics.count() == 1 and Cell.objects.count() == 1


def test_a_retry_resumes_its_own_claim_without_counting_an_attempt(version):
    cells = make_cells(version, seeds=(0,))
    claim = store.claim([cells[0].pk], worker="w1")
    assert store.claim([cells[0].pk], worker="w1", held_claim={
        str(k): v for k, v in claim.items()}) == claim  # JSON keys are strings
    assert fresh(cells)[0].attempts == 1


def test_out_of_attempts_a_cell_fails_as_infrastructure(version, settings):
    settings.HARNESS_MAX_ATTEMPTS = 2
    cells = make_cells(version, seeds=(0,), attempts=2)
    assert store.claim([cells[0].pk], worker="w1") == {}
    cell = fresh(cells)[0]
    assert (cell.status, cell.reason) == (Cell.FAILED, "infrastructure")
    assert "gave up after 2 attempts" in cell.error


def test_store_keeps_reason_and_captured_output(version):
    cells = make_cells(version, seeds=(0, 1))
    claim = store.claim([c.pk for c in cells], worker="w1")
    suite = registry.suite_at("noisy-labels", SHORT)
    store.store_results(version, suite, [
        CellResult("clean", 0, "killed", reason="memory", error="out of memory", captured="x" * 10),
        CellResult("clean", 1, "ok", metrics={"test_acc": 0.9}, captured="hello")], {},
        claim=claim)
    killed, ok = fresh(cells)
    assert (killed.status, killed.reason, killed.captured) == ("killed", "memory", "x" * 10)
    assert (ok.status, ok.reason, ok.captured) == ("ok", "", "hello")
    assert Cell.KILLED in Cell.FINISHED


# --- the task, eagerly ------------------------------------------------------------------


@pytest.mark.slow
def test_eager_task_trains_a_builtin_and_stores_its_cells(version, eager):
    cells = make_cells(version, seeds=(0, 1))
    assert run_task(cells) == {"claimed": 2, "stored": 2}
    for cell in fresh(cells):
        assert (cell.status, cell.attempts, cell.reason) == (Cell.OK, 1, "")
        assert cell.metrics.filter(name="test_acc").exists() and cell.worker
    assert run_task(cells) == {"claimed": 0, "stored": 0}  # a redelivery does nothing
    assert Cell.objects.count() == 2 and fresh(cells)[0].attempts == 1


def test_a_tuned_tracks_final_cells_run_the_whole_protocol_in_one_task(version, eager,
                                                                       monkeypatch):
    """Cells of V+tunedK: one task searches the 8 trials on the validation split (their
    cells stored apart, unqueued), chooses, and trains the claimed final cells; its time
    limit counts the search's members, and dispatch never splits it."""
    monkeypatch.delenv("HARNESS_TIME_SCALE", raising=False)
    monkeypatch.delenv("HARNESS_TIME_MARGIN", raising=False)
    tuned = "1.0+e1+tuned8"
    cells = make_cells(version, seeds=(0, 1), suite_version=tuned)
    group = group_of(cells)
    route = dispatch.route(group)
    members = 5 + 8 * 5  # the seeds' chunk of 5, and 8 trials × 5 search seeds
    assert route["soft_time_limit"] == SUITE.resources.wall_seconds(members) + 30
    assert dispatch.split(group) == [group]
    assert run_task(cells) == {"claimed": 2, "stored": 2}
    final = fresh(cells)
    assert {c.status for c in final} == {Cell.OK}
    chosen = final[0].environment["tuned"]["trial"]
    assert {c.environment["tuned"]["trial"] for c in final} == {chosen}
    searched = Cell.objects.filter(suite_version__startswith=tuned + ".t")
    assert searched.count() == 8 * 5 and {c.environment["split"] for c in searched} == {
        "validation"}
    assert set(searched.values_list("seed", flat=True)) == set(SUITE.tuning.search_seeds)
    assert run_task(cells) == {"claimed": 0, "stored": 0}  # a redelivery does nothing


@pytest.mark.slow
def test_eager_dispatch_end_to_end_through_the_status_page(version, eager, settings):
    settings.HARNESS_EXECUTOR = "tasks.dispatch:enqueue"
    user = User.objects.create_user("erin")
    cells = make_cells(version, variants=("clean", "sym-0.4"), seeds=(0,))
    submission = Submission.objects.create(owner=user, version=version, suites=["noisy-labels"])
    submission.cells.set(cells)
    executors.enqueue(submission)
    client = Client()
    client.force_login(user)
    state = client.get(f"/runs/{submission.pk}/status.json").json()
    assert state["finished"] and state["counts"]["ok"] == 2
    assert all(c["attempts"] == 1 and c["worker"] for c in state["cells"])


def test_infrastructure_errors_are_retried_and_objective_errors_are_not(
        version, eager, monkeypatch):
    monkeypatch.setattr(task_module, "backoff", lambda retries: 0)
    cells = make_cells(version, seeds=(0,))
    calls = []

    def flaky(self, **kwargs):
        calls.append(dict(self.claimed))
        if len(calls) < 3:
            raise OperationalError("server closed the connection unexpectedly")
        return [CellResult("clean", 0, "ok", metrics={"test_acc": 0.7})]

    monkeypatch.setattr(work.GroupRun, "execute", flaky)
    assert run_task(cells)["stored"] == 1
    assert len(calls) == 3 and calls[0] == calls[2]  # retries resume the same claim
    cell = fresh(cells)[0]
    assert (cell.status, cell.attempts) == (Cell.OK, 1)

    other = make_cells(version, seeds=(5,))
    calls.clear()

    def broken(self, **kwargs):
        calls.append(1)
        raise ValueError("a bug outside the objective")

    monkeypatch.setattr(work.GroupRun, "execute", broken)
    run_task(other)
    assert len(calls) == 1  # not retried
    cell = fresh(other)[0]
    assert (cell.status, cell.reason, cell.error) == (
        Cell.FAILED, "infrastructure", work.INTERNAL_ERROR)


def test_objective_failures_are_results_not_retries(version, eager, monkeypatch):
    cells = make_cells(version, seeds=(0,))
    calls = []

    def fails(self, **kwargs):
        calls.append(1)
        return [CellResult("clean", 0, "failed", reason="objective", error="ValueError: x")]

    monkeypatch.setattr(work.GroupRun, "execute", fails)
    run_task(cells)
    cell = fresh(cells)[0]
    assert len(calls) == 1 and (cell.status, cell.reason) == (Cell.FAILED, "objective")


def test_the_last_retry_fails_the_cells_as_infrastructure(version, eager, monkeypatch):
    monkeypatch.setattr(task_module, "backoff", lambda retries: 0)
    cells = make_cells(version, seeds=(0,))
    calls = []

    def sandbox_down(self, **kwargs):
        calls.append(1)
        raise work.InfrastructureError("the sandbox could not start")

    monkeypatch.setattr(work.GroupRun, "execute", sandbox_down)
    run_task(cells)
    cell = fresh(cells)[0]
    assert len(calls) == task_module.MAX_RETRIES + 1
    assert (cell.status, cell.reason) == (Cell.FAILED, "infrastructure")
    assert "not caused by the objective" in cell.error


def test_soft_time_limit_ends_the_cells_as_timeout_wall(version, eager, monkeypatch):
    cells = make_cells(version, seeds=(0, 1))

    def slow(self, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(work.GroupRun, "execute", slow)
    run_task(cells)
    assert {(c.status, c.reason) for c in fresh(cells)} == {(Cell.TIMEOUT, "wall")}


def test_hard_time_limit_and_lost_pool_process_in_the_main_process(version, monkeypatch):
    monkeypatch.setattr(NODE, "name", "cpu@test")
    cells = make_cells(version, seeds=(0, 1))
    other = make_cells(version, variants=("sym-0.4",), seeds=(0,))
    store.claim([c.pk for c in cells + other], worker="cpu@test")
    args = [version.pk, "noisy-labels", SHORT, "clean", [0, 1]]
    task_module.run_queued_group.on_failure(TimeLimitExceeded(90.0), "id", args, {}, None)
    assert {(c.status, c.reason) for c in fresh(cells)} == {(Cell.TIMEOUT, "wall")}
    assert fresh(other)[0].status == Cell.RUNNING  # another group: untouched

    Cell.objects.filter(pk__in=[c.pk for c in cells]).update(status=Cell.RUNNING)
    task_module._release_here(args, {})  # what GroupRequest.on_failure does on WorkerLostError
    assert {(c.status, c.worker, c.attempts) for c in fresh(cells)} == {(Cell.QUEUED, "", 1)}
    assert issubclass(task_module.run_queued_group.Request, task_module.GroupRequest)
    assert WorkerLostError  # the exception GroupRequest.on_failure reacts to


# --- heartbeats and the reaper ----------------------------------------------------------


def test_heartbeat_writes_at_most_once_per_interval(version, settings):
    settings.HARNESS_HEARTBEAT_INTERVAL = 0.0
    cells = make_cells(version, seeds=(0,))
    claim = store.claim([cells[0].pk], worker="w1")
    Cell.objects.update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    beat = heartbeat.Heartbeat(claim)
    beat.beat()
    assert timezone.now() - fresh(cells)[0].heartbeat_at < timedelta(seconds=30)
    assert not beat.lost
    Cell.objects.update(status=Cell.QUEUED)
    beat.beat()
    assert beat.lost
    settings.HARNESS_HEARTBEAT_INTERVAL = 3600.0
    slow = heartbeat.Heartbeat(claim)
    Cell.objects.update(status=Cell.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=5))
    slow.beat()
    assert timezone.now() - fresh(cells)[0].heartbeat_at > timedelta(minutes=4)


def test_reaper_requeues_stale_cells_and_fails_those_out_of_attempts(
        version, settings, monkeypatch):
    settings.HARNESS_MAX_ATTEMPTS = 3
    monkeypatch.setattr(reaper, "queue_depths", lambda: {"cpu": 5, "gpu": 0})
    stale = timezone.now() - timedelta(seconds=settings.HARNESS_HEARTBEAT_TIMEOUT + 5)
    lost, tired, alive = make_cells(version, seeds=(0, 1, 2))
    Cell.objects.filter(pk=lost.pk).update(status=Cell.RUNNING, attempts=1, worker="w",
                                           heartbeat_at=stale)
    Cell.objects.filter(pk=tired.pk).update(status=Cell.RUNNING, attempts=3, worker="w",
                                            heartbeat_at=stale)
    Cell.objects.filter(pk=alive.pk).update(status=Cell.RUNNING, attempts=1, worker="w",
                                            heartbeat_at=timezone.now())
    resent = []
    done = reaper.reap(send=lambda cells: resent.extend(cells.values_list("pk", flat=True)))
    assert done["released"] == [lost.pk] and resent == [lost.pk]
    lost, tired, alive = fresh([lost, tired, alive])
    assert (lost.status, lost.attempts, lost.worker, lost.enqueued_at) == (
        Cell.QUEUED, 1, "", None)
    assert (tired.status, tired.reason) == (Cell.FAILED, "infrastructure")
    assert alive.status == Cell.RUNNING
    page = status.reason_text(lost)
    assert page.startswith("waiting to run again (attempt 2)")


def test_reaper_resends_queued_cells_only_when_their_queue_is_empty(
        version, settings, monkeypatch):
    long_ago = timezone.now() - timedelta(seconds=settings.HARNESS_REQUEUE_AFTER + 5)
    old, recent = make_cells(version, seeds=(0, 1))
    Cell.objects.filter(pk=old.pk).update(enqueued_at=long_ago)
    Cell.objects.filter(pk=recent.pk).update(enqueued_at=timezone.now())
    monkeypatch.setattr(reaper, "queue_depths", lambda: {"cpu": 3, "gpu": 0})
    assert reaper.unsent_cells() == []  # messages still wait: nothing is lost yet
    monkeypatch.setattr(reaper, "queue_depths", lambda: {"cpu": 0, "gpu": 0})
    assert reaper.unsent_cells() == [old.pk]


def test_a_restarted_worker_requeues_what_its_previous_life_held(version, sent):
    mine = make_cells(version, seeds=(0,))
    theirs = make_cells(version, variants=("sym-0.4",), seeds=(0,))
    store.claim([mine[0].pk], worker="cpu@box")
    store.claim([theirs[0].pk], worker="cpu@other")
    assert reaper.release_own("cpu@box") == [mine[0].pk]
    assert fresh(mine)[0].status == Cell.QUEUED and fresh(theirs)[0].status == Cell.RUNNING
    assert [args[3] for args, _ in sent] == ["clean"]


def test_manage_py_reap_requeues_without_sending(version, settings):
    from django.core.management import call_command

    cells = make_cells(version, seeds=(0,))
    store.claim([cells[0].pk], worker="w")
    Cell.objects.update(heartbeat_at=timezone.now() - timedelta(hours=1))
    call_command("reap", "--no-send")
    assert fresh(cells)[0].status == Cell.QUEUED


# --- the status page ----------------------------------------------------------------------


def test_status_page_shows_killed_with_its_reason_and_details_to_the_owner_only(version):
    owner = User.objects.create_user("fay")
    other = User.objects.create_user("gus")
    cells = make_cells(version, seeds=(0, 1, 2, 3))
    submission = Submission.objects.create(owner=owner, version=version, suites=["noisy-labels"])
    submission.cells.set(cells)
    Cell.objects.filter(pk=cells[0].pk).update(
        status=Cell.KILLED, reason="memory", attempts=1, worker="cpu@box",
        error="killed: out of memory SECRET-ERR", captured="printed SECRET-OUT")
    Cell.objects.filter(pk=cells[1].pk).update(status=Cell.RUNNING, attempts=2, worker="cpu@b")
    Cell.objects.filter(pk=cells[2].pk).update(status=Cell.TIMEOUT, reason="wall", attempts=1)
    Cell.objects.filter(pk=cells[3].pk).update(status=Cell.QUEUED, attempts=1)
    mine, theirs = Client(), Client()
    mine.force_login(owner)
    theirs.force_login(other)
    state = mine.get(f"/runs/{submission.pk}/status.json").json()
    assert state["counts"]["killed"] == 1 and state["counts"]["running"] == 1
    killed, running, timeout, queued = state["cells"]
    assert killed["label"] == "killed" and killed["reason_code"] == "memory"
    assert killed["reason"] == "killed by the sandbox: ran out of memory (address-space limit)"
    assert (killed["error"], killed["captured"]) == ("killed: out of memory SECRET-ERR",
                                                   "printed SECRET-OUT")
    assert (running["attempts"], running["worker"]) == (2, "cpu@b")
    assert timeout["reason"] == "timed out: ran past its wall-clock limit"
    assert queued["reason"].startswith("waiting to run again (attempt 2)")
    page = mine.get(f"/runs/{submission.pk}/").content.decode()
    assert "SECRET-ERR" in page and "SECRET-OUT" in page and 'data-reason="memory"' in page
    assert "webapp/status.css" in page and ">cpu@box<" in page
    public = theirs.get(f"/runs/{submission.pk}/status.json").json()["cells"][0]
    assert public["reason"].startswith("killed by the sandbox: ran out of memory")
    assert "owner only" in public["reason"]
    assert public["error"] is None and public["captured"] is None and public["attempts"] == 1
    for response in (theirs.get(f"/runs/{submission.pk}/"),
                     theirs.get(f"/runs/{submission.pk}/status.json")):
        text = response.content.decode()
        assert "SECRET-ERR" not in text and "SECRET-OUT" not in text


def test_cells_held_query_only_matches_the_claims_attempt(version):
    cells = make_cells(version, seeds=(0,))
    claim = store.claim([cells[0].pk], worker="w")
    assert Cell.objects.filter(store.held(claim)).count() == 1
    assert Cell.objects.filter(store.held({cells[0].pk: 7})).count() == 0
    assert Cell.objects.filter(store.held({}) | Q(pk=-1)).count() == 0


# --- one command on a laptop: the web app and a worker, no server to install ------------


SETUP = """
import time
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
deadline = time.monotonic() + 90
while True:  # started beside serve, whose migrations come first
    try:
        executor = MigrationExecutor(connection)
        if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
            break
    except Exception:  # the database file is new, or locked by the migrations
        if time.monotonic() > deadline:
            raise
    if time.monotonic() > deadline:
        raise SystemExit("serve did not migrate the database within 90 s")
    connection.close()
    time.sleep(0.2)
from django.contrib.auth.models import User
from harness.objectives.loading import load_objective
from harness.contract import registry
from webapp.execution import executors, heartbeat, status
from webapp.execution import groups as work
from harness.storage import store
from harness.storage.models import Cell, Submission
suite = registry.suite_at("noisy-labels", "1.0+e2")
version = store.version_for(load_objective("ce"))
user = User.objects.create_user("laptop")
cells = [Cell.objects.create(version=version, suite="noisy-labels", suite_version="1.0+e2",
                             variant=v, seed=s, variant_hash=suite.variant(v).config_hash(suite))
         for v in ("clean", "sym-0.4") for s in (0, 1)]
submission = Submission.objects.create(owner=user, version=version, suites=["noisy-labels"])
submission.cells.set(cells)
executors.enqueue(submission)
print("SUBMISSION", submission.pk)
"""


@pytest.mark.slow
def test_serve_with_worker_runs_submissions_on_the_embedded_broker(tmp_path):
    import json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from tests.conftest import cli_environment

    root = Path(__file__).resolve().parents[2]
    env = cli_environment(tmp_path / "home")  # SQLite and the embedded broker, no servers
    env = {k: v for k, v in env.items() if not k.startswith(("HARNESS_BROKER", "CELERY_"))}
    env.update({"C_FORCE_ROOT": "1", "HARNESS_TORCH_THREADS": "1", "HARNESS_EXECUTOR": "none"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen([sys.executable, "manage.py", "serve", f"127.0.0.1:{port}",
                              "--with-worker"], cwd=root, env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    # The web app's runner inside serve is the worker; this shell sends like it would. It
    # starts (imports) while serve does, and waits for serve's migrations.
    setup = subprocess.Popen([sys.executable, "manage.py", "shell", "-c", SETUP], cwd=root,
                             env={**env, "HARNESS_EXECUTOR": "tasks.dispatch:enqueue"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def get(path):
        with urllib.request.urlopen(base + path, timeout=10) as response:
            return response.read().decode()

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get("/api/")
                break
            except OSError:
                assert serve.poll() is None and time.monotonic() < deadline, (
                    (tmp_path / "serve.log").read_text())
                time.sleep(0.2)
        stdout, stderr = setup.communicate(timeout=120)
        assert setup.returncode == 0, stderr
        submission = int(stdout.split("SUBMISSION")[1])
        deadline = time.monotonic() + 120
        while True:
            state = json.loads(get(f"/runs/{submission}/status.json"))
            if state["finished"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert state["finished"] and state["counts"]["ok"] == 4, (
            state, (tmp_path / "serve.log").read_text()[-4000:])
        assert {c["worker"] for c in state["cells"]} == {f"local@{socket.gethostname()}"}
    finally:
        if setup.poll() is None:
            setup.kill()
            setup.wait()
        serve.terminate()  # serve stops the web server and the worker itself
        try:
            serve.wait(timeout=60)
        finally:
            left = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                    and _group_of(p) == serve.pid]
            if left:
                os.killpg(serve.pid, 9)
    assert not left, "serve left processes behind"


def _group_of(proc) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


# --- progress and time on the run status page -------------------------------------------


def test_a_running_group_writes_its_progress_with_the_heartbeat(version, settings, monkeypatch):
    """The trainer's per-epoch reports reach the cells' ``progress`` through the heartbeat;
    the group's record says how many cells trained together and for how long."""
    settings.HARNESS_HEARTBEAT_INTERVAL = 0.0
    cells = make_cells(version, variants=("sym-0.2",), seeds=(0, 1, 2, 3),
                       suite_version="1.0+e4")
    written: list[float | None] = []
    real = store.heartbeat

    def spy(claim, progress=None):
        written.append(progress)
        return real(claim, progress)

    monkeypatch.setattr(store, "heartbeat", spy)
    run_task(cells)
    reports = [p for p in written if p is not None]
    assert reports == sorted(reports) and reports[-1] == pytest.approx(1.0)
    assert pytest.approx(0.25) in reports  # after the first of 4 epochs: 4 cells × 1/4
    done = fresh(cells)
    assert {c.status for c in done} == {Cell.OK}
    # the 4 seeds trained in their chunk of 5 (harness/contract/chunks.py), and the record says so
    assert {c.environment["group_members"] for c in done} == {5}
    assert all(c.environment["chunk"] == {"size": 5, "index": 0} for c in done)
    seconds = {c.environment["group_seconds"] for c in done}
    assert len(seconds) == 1 and seconds.pop() > 0
    assert all(c.wall_time * 5 == pytest.approx(c.environment["group_seconds"], rel=0.5)
               for c in done)  # a cell's wall time is its share of the group's


def test_heartbeat_progress_is_bounded_and_a_new_claim_clears_it(version, settings):
    settings.HARNESS_HEARTBEAT_INTERVAL = 0.0
    (cell,) = make_cells(version, seeds=(0,))
    claim = store.claim([cell.pk], worker="w1")
    beat = heartbeat.Heartbeat(claim, cells=4)
    assert beat.progress is None  # nothing reported yet
    beat.advance(1)
    assert fresh([cell])[0].progress == pytest.approx(0.25)
    beat.advance(10)  # more than the group: still 1
    assert fresh([cell])[0].progress == 1.0
    Cell.objects.update(status=Cell.QUEUED)  # requeued by the reaper
    assert fresh([cell])[0].progress == 1.0
    store.claim([cell.pk], worker="w2")
    assert fresh([cell])[0].progress is None  # a fresh attempt starts from nothing


def test_status_shows_progress_with_an_eta_and_the_groups_honest_wall_time(version):
    now = timezone.now()
    running, finished, early = make_cells(version, seeds=(0, 1, 2))
    Cell.objects.filter(pk=running.pk).update(status=Cell.RUNNING, progress=0.25,
                                              started_at=now - timedelta(seconds=60))
    Cell.objects.filter(pk=early.pk).update(status=Cell.RUNNING, progress=None,
                                            started_at=now)
    Cell.objects.filter(pk=finished.pk).update(
        status=Cell.OK, wall_time=240 / 14,
        environment={"group_members": 14, "group_seconds": 240.0})
    rows = {c.pk: status.timing(c, now) for c in fresh([running, finished, early])}
    assert rows[running.pk]["progress"] == 0.25
    assert rows[running.pk]["eta_seconds"] == pytest.approx(180.0)  # 60 s for a quarter
    assert rows[running.pk]["time_text"] == "25% of its group · about 3 min left"
    assert rows[early.pk] == {"progress": None, "eta_seconds": None, "group_members": None,
                              "group_seconds": None, "time_text": ""}
    assert rows[finished.pk]["time_text"] == "4 min, 14 cells together"  # not 17 s a cell
    assert rows[finished.pk]["group_members"] == 14
