"""The cell tallies the page caches key on: kept by database triggers, so they equal a
count over the cells after any mix of writes (ORM saves, bulk updates, deletes, a
version's cascade), on PostgreSQL and on the embedded SQLite, and their change counter
moves whenever the finished cells of a (variant, version) change."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("clean", "sym-0.4", "asym-0.4")
STATUSES = ("queued", "running", "ok", "diverged", "failed", "timeout", "killed")


def _counted() -> dict[tuple, int]:
    """Finished cells per tally key, counted from the cells themselves."""
    from django.db.models import Count

    from harness.storage.models import Cell

    return {(a["suite"], a["suite_version"], a["variant"], a["version_id"]): a["n"]
            for a in Cell.objects.filter(status__in=Cell.FINISHED)
            .values("suite", "suite_version", "variant", "version_id").order_by()
            .annotate(n=Count("id"))}


def _tallied() -> dict[tuple, tuple[int, int]]:
    from harness.storage.models import CellTally

    return {(t.suite, t.suite_version, t.variant, t.version_id): (t.finished, t.changes)
            for t in CellTally.objects.all()}


def random_writes(steps: int, seed: int) -> dict:
    """``steps`` random writes through every write path the code uses; after each, the
    tallies must equal the count and a key whose finished cells changed must have a
    larger change counter. Returns what was checked (raises AssertionError on a miss)."""
    from harness.storage.models import Cell, Objective, ObjectiveVersion

    rng = random.Random(seed)
    def new_version(i: int) -> ObjectiveVersion:
        obj = Objective.objects.create(slug=f"tally-{seed}-{i}", name=f"tally {i}")
        return ObjectiveVersion.objects.create(objective=obj, code="x", code_sha256=f"{i:064x}",
                                               key=f"{seed}-{i}", label=obj.slug)

    versions = [new_version(i) for i in range(3)]
    kinds: dict[str, int] = {}
    for step in range(steps):
        before = _tallied()
        cells = list(Cell.objects.all())
        kind = rng.choice(["create"] * 3 + ["save", "update", "bulk", "delete", "heartbeat",
                                            "drop-version"])
        if kind in ("save", "update", "delete", "bulk") and not cells:
            kind = "create"
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "create":
            v = rng.choice(versions)
            Cell.objects.get_or_create(version=v, suite="noisy-labels", suite_version="1.0",
                                       variant=rng.choice(VARIANTS), seed=rng.randrange(6),
                                       defaults={"status": rng.choice(STATUSES)})
        elif kind == "save":  # store.store_results: the whole row saved
            c = rng.choice(cells)
            c.status = rng.choice(STATUSES)
            c.save()
        elif kind == "update":  # claim / finish / release: a compare-and-set update()
            c = rng.choice(cells)
            Cell.objects.filter(pk=c.pk, status=c.status).update(status=rng.choice(STATUSES))
        elif kind == "bulk":  # the reaper: many cells at once
            Cell.objects.filter(variant=rng.choice(VARIANTS)).update(
                status=rng.choice(STATUSES))
        elif kind == "delete":
            rng.choice(cells).delete()
        elif kind == "heartbeat":  # running cells' heartbeat: no finished cell changes
            Cell.objects.filter(status="running").update(worker="w", progress=0.5)
        elif kind == "drop-version":  # a version deleted (its cells cascade), a new one made
            gone = rng.randrange(len(versions))
            versions[gone].delete()
            versions[gone] = new_version(3 + step)
        after = _tallied()
        counted = _counted()
        assert {k: n for k, (n, _) in after.items() if n} == counted, kind
        assert all(n >= 0 for n, _ in after.values())
        for key, (n, changes) in after.items():
            old_n, old_changes = before.get(key, (0, 0))
            assert changes >= old_changes, key
            if n != old_n:
                assert changes > old_changes, key
        if kind == "heartbeat":
            assert after == before, "a write that touches no finished cell moved a tally"
    return {"steps": steps, "kinds": kinds, "keys": len(_tallied())}


@pytest.mark.django_db
def test_tallies_follow_every_write_on_postgres():
    from django.db import connection

    assert connection.vendor == "postgresql"
    checked = random_writes(250, seed=1)
    assert min(checked["kinds"].values()) >= 5 and len(checked["kinds"]) == 7


def test_tallies_follow_every_write_on_sqlite(tmp_path):
    """The embedded database (a fresh SQLite file, migrated) keeps them by its own triggers."""
    script = ("import django, json, sys; django.setup();"
              "from django.core.management import call_command;"
              "call_command('migrate', verbosity=0);"
              "from django.db import connection; assert connection.vendor == 'sqlite';"
              "from tests.storage.test_cell_tally import random_writes;"
              "print(json.dumps(random_writes(250, seed=2)))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings",
           "HARNESS_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    checked = json.loads(out.stdout.strip().splitlines()[-1])
    assert min(checked["kinds"].values()) >= 5 and len(checked["kinds"]) == 7
    assert (tmp_path / "harness.sqlite3").exists()


def test_the_triggers_know_every_finished_status():
    """The migration's status list is the model's: a new finished status must be added to
    the triggers (a new migration), or tallies would miss its cells."""
    from importlib import import_module

    from harness.storage.models import Cell

    migration = import_module("harness.storage.migrations.0008_cell_tally")
    assert migration.FINISHED == repr(tuple(Cell.FINISHED))
