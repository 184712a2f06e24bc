"""A board populated on first start (issue 35, item 2): `populate_baselines --queue` queues
the built-in baselines' cells on the workers and returns; the home page counts them down."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from harness.contract.registry import get_suite
from harness.storage.models import Cell
from tests.workers.test_tasks import sent  # noqa: F401  the messages dispatch would send
from webapp.bootstrap import baselines_progress

pytestmark = pytest.mark.django_db

SUITE = get_suite("noisy-labels")


def test_queue_sends_the_baselines_cells_to_the_workers_and_the_home_page_counts_them(
        sent, settings, client, capsys):  # noqa: F811
    settings.HARNESS_EXECUTOR = "tasks.dispatch:enqueue"
    assert baselines_progress() is None and "Baselines:" not in client.get("/").content.decode()
    call_command("populate_baselines", "--queue", "--suite", "noisy-labels", "-o", "ce",
                 "-o", "gce", "--variants", "clean", "sym-0.4", "--seeds", "2")
    assert "8 baseline cells queued (4 groups sent" in capsys.readouterr().out
    cells = Cell.objects.filter(suite="noisy-labels", suite_version=SUITE.version)
    assert cells.count() == 8 and set(cells.values_list("status", flat=True)) == {"queued"}
    assert sorted((args[3], tuple(args[4])) for args, _ in sent) == [
        ("clean", (0, 1)), ("clean", (0, 1)), ("sym-0.4", (0, 1)), ("sym-0.4", (0, 1))]
    assert {options["queue"] for _, options in sent} == {"cpu"}
    page = client.get("/").content.decode()
    assert "Baselines: 0 of 8 cells done" in page
    cells.filter(variant="clean").update(status=Cell.OK)
    assert baselines_progress() == (4, 8)
    # run again: nothing new is queued, nothing is sent twice
    sent.clear()
    call_command("populate_baselines", "--queue", "--suite", "noisy-labels", "-o", "ce",
                 "-o", "gce", "--variants", "clean", "sym-0.4", "--seeds", "2")
    assert "0 baseline cells queued (0 groups sent" in capsys.readouterr().out
    assert Cell.objects.count() == 8 and not sent
    call_command("populate_baselines", "--queue", "--if-empty")  # the image's first start
    assert "cells are stored already" in capsys.readouterr().out and not sent
    cells.update(status=Cell.OK)
    assert baselines_progress() is None and "Baselines:" not in client.get("/").content.decode()


def test_queue_needs_the_celery_executor_and_the_protocol(settings):
    settings.HARNESS_EXECUTOR = "thread"
    with pytest.raises(CommandError, match="HARNESS_EXECUTOR=tasks.dispatch:enqueue"):
        call_command("populate_baselines", "--queue")
    settings.HARNESS_EXECUTOR = "tasks.dispatch:enqueue"
    with pytest.raises(CommandError, match="--epochs is for a smoke run"):
        call_command("populate_baselines", "--queue", "--epochs", "1")
    assert not Cell.objects.exists()


def test_before_the_reference_has_a_score_nobody_is_ranked(client):
    from tests.web.test_leaderboard import make_objective
    from webapp import leaderboard

    ranked = SUITE.ranked_variants
    make_objective("first", {v: [0.9, 0.91, 0.92, 0.9, 0.93] for v in ranked}, builtin=False)
    (row,) = leaderboard.home_table()["rows"]
    assert row["rank"] is None and row["no_reference"] == ["noisy-labels"]
    assert row["score"] is not None  # its score stands; only the rank waits
    assert "no reference yet" in client.get("/").content.decode()
    make_objective("ce", {v: [0.8] * 5 for v in ranked})  # the reference lands
    rows = {r["objective"]: r for r in leaderboard.home_table()["rows"]}
    assert rows["first"]["rank"] == 1 and rows["ce"]["rank"] == 2
    assert not rows["first"]["no_reference"]
    assert "no reference yet" not in client.get("/").content.decode()
