"""Over 500 lines on purpose: one bench builds, measures and reports its database.

Page latency at scale: is the leaderboard fast with 1M metric rows?

Builds a throwaway PostgreSQL database (``--database``, default ``harness_bench``,
created and dropped here with the harness role's CREATEDB), migrates it, and loads
200 objectives × 50 variants × 10 seeds × 10 metrics = 1M metric rows (plus 100k
cells and two 50-point training curves per cell) with COPY. Then, in-process with
``django.test.Client`` (server-side time: URL routing, views, ORM, templates; no
network, no browser), it times each page:

* cold: the first request after the leaderboard cache (``TableCache``) is emptied;
* warm: p50/p95 over ``--repeats`` (50) further requests;
* SQL queries per request (CaptureQueriesContext) and their summed time, cold and warm;
* after a landing: how a busy server sees a page. Before each of ``--landings`` requests
  per page one new cell is stored through ``store.store_results`` (the workers' and the
  CLI's write path), alternately in the page's variant and in another one, for a random
  non-reference objective; then the page is timed (p50/p95/max). The ratio to the page's
  cold time (the uncached computation, measured in the same run; ``--isolated-cold``
  makes each page's cold time its own) says what the incremental caches save.

Query counts are taken twice, with the first 20 objectives loaded and with all of
them, to show whether they grow with the number of objectives. Pages that miss the
target (warm p95 < 100 ms) get a profile: the slowest SQL statements and the
functions with the most cumulative time (cProfile).

The suite is synthetic: ``bench-synthetic`` with ``--variants`` variants
(``v00``...) and ``--metrics`` metrics (``m0`` is the headline, accuracy-like),
registered only inside this process (``harness.contract.registry.add_packages`` of a module
object made here; the real suites stay registered, with no results). Objectives
``ce`` (the reference), ``obj-001``... (the first 15 are built-in baselines, the rest
belong to 20 users, one in four private), one version each. Scores are
drawn so that objectives differ by more than seed noise for some pairs and tie for
others; ~1% of cells diverged, ~0.5% failed.

Nothing is asserted: this prints a report (and ``--json OUT`` writes it).
Run: ``.venv/bin/python bench/pages.py`` (full size, a few minutes on 2 cores), or
``--objectives 40 --variants 8 --seeds 5 --repeats 20`` for a quick look; ``--smoke`` is the
tiny run the test suite makes so that this file cannot rot.
Needs the PostgreSQL of ``scripts/services.sh``; ``--admin-url`` (default: the
``DATABASE_URL`` of the tests) is where the bench database is created from.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITE_NAME = "bench-synthetic"
SMALL = 20  # objectives for the query-count comparison
TARGET_P95_MS = 100.0
TARGET_LANDING_MS = 200.0
BUILTIN = 15
USERS = 20
CURVES = ("train_loss", "grad_norm")
CODE = '''"""A synthetic objective for the page benchmark (never run)."""


def classification_loss(logits, targets, *, q: float = 0.7):
    """GCE-like: (1 - p_y^q) / q."""
    p_y = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return (1 - p_y.clamp_min(1e-7) ** q) / q
''' + "\n".join(f"# padding line {i} so the code panel has some length" for i in range(40))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--objectives", type=int, default=200)
    p.add_argument("--variants", type=int, default=50)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--metrics", type=int, default=10)
    p.add_argument("--curve-points", type=int, default=50,
                   help="points per training curve (two curves per cell; 0: none)")
    p.add_argument("--repeats", type=int, default=50, help="warm requests per page")
    p.add_argument("--small-repeats", type=int, default=10,
                   help=f"warm requests per page with {SMALL} objectives")
    p.add_argument("--isolated-cold", action="store_true",
                   help="empty the cache before each page's cold request (slow at full size)")
    p.add_argument("--landings", type=int, default=20,
                   help="requests per page measured just after a new cell landed (0: none)")
    p.add_argument("--quiet-wait", type=float, default=10.0,
                   help="before each page's warm requests, wait up to this many seconds for "
                        "other processes to use < 15%% of the CPUs")
    p.add_argument("--database", default="harness_bench")
    p.add_argument("--admin-url", default=os.environ.get(
        "DATABASE_URL", "postgres://harness:harness@127.0.0.1:5432/harness"))
    p.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    p.add_argument("--json", type=Path, help="write the full report here")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny run (6 objectives, 3 variants) into its own database")
    args = p.parse_args(argv)
    if args.smoke:
        args.objectives, args.variants, args.seeds, args.metrics = 6, 3, 2, 3
        args.curve_points, args.repeats, args.small_repeats, args.quiet_wait = 5, 2, 1, 0.0
        args.landings = 2  # one in the page's variant, one in another
        args.database = f"{args.database}_smoke"
    return args


# ---------------------------------------------------------------- database and suite
def _with_db(url: str, name: str) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{name}"))


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://", 1),
                         autocommit=True) as conn:
        conn.execute(sql)


def drop_database(url: str, name: str, tries: int = 20) -> None:
    """DROP ... WITH (FORCE), retried: an autovacuum worker in the database refuses a
    non-superuser's FORCE ("must be a member of the role ..."), and it ends in moments."""
    import psycopg

    for attempt in range(tries):
        try:
            _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


def setup(args: argparse.Namespace) -> None:
    """Fresh database, Django configured on it, migrated; the synthetic suite registered."""
    drop_database(args.admin_url, args.database)
    _admin(args.admin_url, f'CREATE DATABASE "{args.database}"')
    os.environ["DATABASE_URL"] = _with_db(args.admin_url, args.database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver,localhost,127.0.0.1"
    os.environ.setdefault("STATIC_ROOT", tempfile.mkdtemp(prefix="bench-static-"))
    os.environ.pop("HARNESS_DEBUG", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    register_suite(args.variants, args.metrics)


def synthetic_suite(variants: int, metrics: int):
    from harness.contract.suite import Anchors, CurveSpec, MetricSpec, Suite, Variant, VariantAxis

    specs = tuple(MetricSpec(f"m{i}", "headline accuracy" if i == 0 else f"metric {i}",
                             better="lower" if i % 3 == 2 else "higher",
                             unit="percent" if i == 0 else "number",
                             decimals=1 if i == 0 else 3, short=f"m{i}")
                  for i in range(metrics))
    rates = np.linspace(0.0, 0.8, variants)
    return Suite(
        name=SUITE_NAME, version="1.0", hooks=("classification_loss",),
        description="Synthetic suite for bench/pages.py (never run).", headline="m0",
        metrics=specs, anchors={"m0": Anchors(worst=0.1, best=1.0)},
        variants=tuple(Variant(f"v{i:02d}", {"dataset": "synthetic", "rate": float(r)},
                               f"synthetic variant {i}") for i, r in enumerate(rates)),
        pipeline="bench.pages:NoPipeline", baselines=("ce",), reference="ce",
        settings={"epochs": 0}, curves=tuple(CurveSpec(c, c) for c in CURVES),
        variant_axis=VariantAxis("rate", "rate"))


def register_suite(variants: int, metrics: int) -> None:
    from harness.contract import registry
    module = types.ModuleType("bench_synthetic_suite")
    module.SUITE = synthetic_suite(variants, metrics)
    sys.modules[module.__name__] = module
    registry.add_packages([module.__name__])  # bench only: in this process


# ---------------------------------------------------------------- loading
def _slug(i: int) -> str:
    return "ce" if i == 0 else f"obj-{i:03d}"  # objective 0 is the suite's reference



def load(args: argparse.Namespace, first: int, last: int) -> dict:
    """Objectives [first, last) with every (variant, seed) cell, metrics and curves."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from harness.contract.registry import get_suite
    from harness.storage.models import Objective, ObjectiveVersion

    suite = get_suite(SUITE_NAME)
    rng = np.random.default_rng(first)
    t0 = time.perf_counter()
    users = list(get_user_model().objects.order_by("id"))
    if not users:
        model = get_user_model()
        users = model.objects.bulk_create(model(username=f"user-{i:02d}") for i in range(USERS))
    with transaction.atomic():
        objectives = Objective.objects.bulk_create(
            Objective(slug=_slug(i), name=f"Objective {i:03d}",
                      description=f"Synthetic objective {i} for the page benchmark.",
                      is_builtin=i < BUILTIN, owner=None if i < BUILTIN else users[i % len(users)],
                      visibility=Objective.PRIVATE if i >= BUILTIN and i % 4 == 0
                      else Objective.PUBLIC)
            for i in range(first, last))
        versions = ObjectiveVersion.objects.bulk_create(
            ObjectiveVersion(objective=o, code=CODE.replace("0.7", f"0.{o.id % 9 + 1}"),
                             code_sha256=f"{o.id:064x}", hyperparameters={"q": 0.7},
                             key=f"{o.id:064x}", label=o.slug)
            for o in objectives)
    t_objects = time.perf_counter() - t0

    now = timezone.now().isoformat()
    hashes = [v.config_hash(suite) for v in suite.variants]
    n_var, n_seed, n_met = len(suite.variants), args.seeds, len(suite.metrics)
    counts = {"cells": 0, "metrics": 0, "curves": 0}
    with connection.cursor() as django_cursor:
        cur = django_cursor.cursor  # the psycopg cursor under Django's wrapper
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM webapp_cell")
        next_id = cur.fetchone()[0] + 1
        t1 = time.perf_counter()
        with transaction.atomic():
            for version in versions:
                quality = rng.normal(0.72, 0.05)
                ids = np.arange(next_id, next_id + n_var * n_seed).reshape(n_var, n_seed)
                next_id += n_var * n_seed
                status = rng.choice(["ok", "diverged", "failed"], size=(n_var, n_seed),
                                    p=[0.985, 0.01, 0.005])
                seed_effect = rng.normal(0, 0.01, size=n_seed)
                head = (quality - 0.3 * np.linspace(0, 0.8, n_var)[:, None] + seed_effect
                        + rng.normal(0, 0.01, size=(n_var, n_seed)))
                values = rng.uniform(0, 1, size=(n_var, n_seed, n_met))
                values[..., 0] = head
                with cur.copy("COPY webapp_cell (id, version_id, suite, suite_version, variant,"
                              " variant_hash, seed, status, attempts, error, finished_at,"
                              " wall_time, environment, reason, captured, worker) FROM STDIN"
                              ) as copy:
                    for v in range(n_var):
                        for s in range(n_seed):
                            st = str(status[v, s])
                            copy.write_row((
                                int(ids[v, s]), version.id, suite.name, suite.version,
                                suite.variants[v].name, hashes[v], s, st, 1,
                                "" if st != "failed" else "RuntimeError: synthetic failure",
                                now, 1.0, '{"device": "cpu", "bench": true}',
                                "objective" if st == "failed" else "", "", ""))
                with cur.copy("COPY webapp_metric (cell_id, name, value) FROM STDIN") as copy:
                    names = [m.name for m in suite.metrics]
                    for (v, s), cell_id in np.ndenumerate(ids):
                        for k in range(n_met):
                            copy.write_row((int(cell_id), names[k], float(values[v, s, k])))
                if args.curve_points:
                    steps = np.arange(args.curve_points)
                    with cur.copy("COPY webapp_curve (cell_id, name, \"values\") FROM STDIN"
                                  ) as copy:
                        for cell_id in ids.ravel():
                            loss = np.round(2.3 * np.exp(-steps / 15) + rng.uniform(
                                0, 0.05, steps.size), 4)
                            norm = np.round(rng.uniform(0.5, 3, steps.size), 4)
                            copy.write_row((int(cell_id), CURVES[0], json.dumps(loss.tolist())))
                            copy.write_row((int(cell_id), CURVES[1], json.dumps(norm.tolist())))
                counts["cells"] += ids.size
                counts["metrics"] += ids.size * n_met
                counts["curves"] += ids.size * (2 if args.curve_points else 0)
            cur.execute("SELECT setval(pg_get_serial_sequence('webapp_cell', 'id'), %s)",
                        (next_id - 1,))
        t_copy = time.perf_counter() - t1
        t2 = time.perf_counter()
        cur.execute("ANALYZE")
        t_analyze = time.perf_counter() - t2
    return {"objectives": last - first, **counts, "objects_s": t_objects, "copy_s": t_copy,
            "analyze_s": t_analyze, "total_s": time.perf_counter() - t0}


# ---------------------------------------------------------------- measuring
def pages(args: argparse.Namespace, n_objectives: int) -> list[tuple[str, str]]:
    variant = f"v{min(7, args.variants - 1):02d}"
    obj = f"obj-{min(42, n_objectives - 1):03d}"
    return [
        ("home", "/"),
        ("suite page", f"/suites/{SUITE_NAME}/?variant={variant}"),
        ("objective page", f"/objectives/{obj}/"),
        ("api suite (1 variant)", f"/api/suites/{SUITE_NAME}?variant={variant}"),
        ("api suite (all variants)", f"/api/suites/{SUITE_NAME}"),
        ("api results page", f"/api/results?suite={SUITE_NAME}&variant={variant}"
                             f"&page=1&page_size=100"),
    ]


def _request(client, url: str) -> tuple[float, int]:
    t = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - t) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {response.status_code}")
    return elapsed, len(response.content)


def _counted(client, url: str) -> tuple[float, int, float, list[dict]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as q:
        ms, _ = _request(client, url)
    sql_ms = sum(float(x["time"]) for x in q.captured_queries) * 1000
    return ms, len(q.captured_queries), sql_ms, q.captured_queries


def _profile(client, url: str) -> dict:
    """Slowest SQL and the most expensive functions of one warm request."""
    _, _, _, queries = _counted(client, url)
    slow = sorted(queries, key=lambda x: -float(x["time"]))[:3]
    profiler = cProfile.Profile()
    profiler.enable()
    _request(client, url)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    rows = []
    for (file, line, func), (_, calls, tottime, cumtime, _) in stats.stats.items():
        if any(part in file for part in ("/webapp/", "/harness/", "/suites/")):
            rows.append({"function": f"{Path(file).relative_to(ROOT)}:{line} {func}",
                         "calls": calls, "tottime_ms": tottime * 1000,
                         "cumtime_ms": cumtime * 1000})
    rows.sort(key=lambda r: -r["cumtime_ms"])
    return {"slow_sql": [{"ms": float(x["time"]) * 1000, "sql": x["sql"][:300]} for x in slow],
            "functions": rows[:12]}


def _cpu_seconds(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _busy_seconds() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Others:
    """Share of the CPUs used by *other* processes while a block runs (0.5 = one of two
    cores busy): everything but this process and the PostgreSQL backend serving it."""

    share = float("nan")

    def __init__(self, backend: int):
        self.backend = backend

    def _ours(self) -> float:
        try:
            return _cpu_seconds() + _cpu_seconds(self.backend)
        except OSError:  # backend not visible (database on another host): count it as other
            return _cpu_seconds()

    def __enter__(self):
        self.busy, self.ours, self.t0 = _busy_seconds(), self._ours(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self.t0
        others = (_busy_seconds() - self.busy) - (self._ours() - self.ours)
        self.share = max(0.0, others) / (wall * (os.cpu_count() or 1))


def _backend_pid() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return cur.fetchone()[0]


def wait_quiet(max_wait: float, backend: int, threshold: float = 0.15) -> float:
    """Wait (up to ``max_wait`` s) until other processes use < ``threshold`` of the CPUs."""
    deadline = time.perf_counter() + max_wait
    while True:
        with Others(backend) as o:
            time.sleep(0.5)
        if o.share < threshold or time.perf_counter() > deadline:
            return o.share


def measure(args: argparse.Namespace, n_objectives: int, repeats: int) -> dict:
    """Cold: the cache is emptied once, then each page is requested once in the order of
    ``pages`` (a payload built by an earlier page is reused: the suite page's family plot
    builds every variant table), or emptied before each page with ``--isolated-cold``.
    Warm: ``repeats`` requests per page after that."""
    from django.test import Client

    from harness.storage.models import TableCache

    client = Client()
    _request(client, "/api/suites")  # imports, URL resolver, first connection: not a page's cost
    backend = _backend_pid()
    report: dict[str, dict] = {}
    TableCache.objects.all().delete()
    cold_started = time.perf_counter()
    for name, url in pages(args, n_objectives):
        try:
            if args.isolated_cold:
                TableCache.objects.all().delete()
            cold_ms, cold_q, cold_sql, _ = _counted(client, url)
            report[name] = {"url": url, "cold_ms": cold_ms, "cold_queries": cold_q,
                            "cold_sql_ms": cold_sql}
        except Exception as e:  # a page that fails is reported, the others still measured
            traceback.print_exc()
            report[name] = {"url": url, "error": f"{type(e).__name__}: {e}"}
    cold_total = time.perf_counter() - cold_started
    for name, entry in report.items():
        if "error" in entry:
            continue
        url = entry["url"]
        try:
            if args.isolated_cold:  # a later page's cold request emptied the cache again
                _request(client, url)
            quiet = wait_quiet(args.quiet_wait, backend) if args.quiet_wait else float("nan")
            _, warm_q, warm_sql, _ = _counted(client, url)
            times, size = [], 0
            with Others(backend) as others:
                for _ in range(repeats):
                    ms, size = _request(client, url)
                    times.append(ms)
        except Exception as e:
            traceback.print_exc()
            entry["error"] = f"{type(e).__name__}: {e}"
            continue
        p50, p95 = statistics.median(times), float(np.percentile(times, 95))
        entry.update({"warm_queries": warm_q, "warm_sql_ms": warm_sql, "p50_ms": p50,
                      "p95_ms": p95, "max_ms": max(times), "bytes": size,
                      "others_cpu_share": others.share, "others_before": quiet,
                      "times_ms": times})
        if p95 >= TARGET_P95_MS:
            entry["profile"] = _profile(client, url)
        print(f"  {name:<26} cold {entry['cold_ms']:8.0f} ms  p50 {p50:7.1f}  p95 {p95:7.1f} ms"
              f"  queries {entry['cold_queries']}/{warm_q}  others {others.share:4.0%}",
              flush=True)
    report["_cold_total_s"] = {"seconds": cold_total}
    if args.landings:
        landings(args, client, report, n_objectives)
    return report


# Pages whose cached payloads a landing cell invalidates (the results page reads cells).
LANDING_PAGES = ("home", "suite page", "objective page", "api suite (1 variant)",
                 "api suite (all variants)")


class Lander:
    """Stores one new cell at a time through the real write path: a random non-reference
    objective, the given variant, the next unused seed, every suite metric."""

    def __init__(self, args: argparse.Namespace, n_objectives: int):
        from harness.contract.registry import get_suite
        from harness.storage.models import ObjectiveVersion

        self.suite = get_suite(SUITE_NAME)
        self.versions = list(ObjectiveVersion.objects.filter(
            objective__slug__in=[_slug(i) for i in range(1, n_objectives)]).order_by("id"))
        self.rng = np.random.default_rng(n_objectives)
        self.seed = args.seeds + 1000 * n_objectives  # no cell has these seeds yet

    def land(self, variant: str) -> None:
        from harness.contract.suite import CellResult
        from harness.storage import store

        version = self.versions[int(self.rng.integers(len(self.versions)))]
        self.seed += 1
        metrics = {m.name: float(self.rng.uniform(0.4, 0.8)) for m in self.suite.metrics}
        store.store_results(version, self.suite, [CellResult(variant, self.seed, "ok",
                                                               metrics)], {"bench": True})


def landings(args: argparse.Namespace, client, report: dict, n_objectives: int) -> None:
    """Per page, ``--landings`` requests each just after a new cell landed: odd ones in
    the page's variant (its table must be rebuilt), even ones in another variant. Twice:
    as deployed (the writer renders again the page bodies people read once its cells
    committed: ``HARNESS_REFRESH_PAGES``), and with that refresh off, where the first
    reader after a landing pays for the rebuild. The writer's time to store a cell (and
    refresh) is reported beside the page's."""
    from django.conf import settings

    lander = Lander(args, n_objectives)
    names = [v.name for v in lander.suite.variants]
    own = f"v{min(7, args.variants - 1):02d}"
    others = [v for v in names if v != own] or [own]
    deployed = settings.HARNESS_REFRESH_PAGES
    for name in LANDING_PAGES:
        entry = report.get(name)
        if entry is None or "error" in entry:
            continue
        for label, refresh in (("", deployed), ("reader_", 0)):
            settings.HARNESS_REFRESH_PAGES = refresh
            _counted(client, entry["url"])  # this page's body is one a visitor just read
            times, queries, writes = [], [], []
            for i in range(args.landings):
                t = time.perf_counter()
                lander.land(own if i % 2 == 0
                            else others[int(lander.rng.integers(len(others)))])
                writes.append((time.perf_counter() - t) * 1000)
                ms, q, _, _ = _counted(client, entry["url"])
                times.append(ms)
                queries.append(q)
            entry.update({f"{label}landing_p50_ms": statistics.median(times),
                          f"{label}landing_p95_ms": float(np.percentile(times, 95)),
                          f"{label}landing_max_ms": max(times),
                          f"{label}landing_times_ms": times,
                          f"{label}landing_queries": max(queries),
                          f"{label}store_p50_ms": statistics.median(writes),
                          f"{label}store_p95_ms": float(np.percentile(writes, 95))})
        settings.HARNESS_REFRESH_PAGES = deployed
        p95 = entry["landing_p95_ms"]
        entry["cold_over_landing"] = entry["cold_ms"] / p95
        entry["reader_over_landing"] = entry["reader_landing_p95_ms"] / p95
        print(f"  {name:<26} after a landing: p50 {entry['landing_p50_ms']:7.1f}  p95 "
              f"{p95:7.1f} ms (refresh off: p95 {entry['reader_landing_p95_ms']:7.1f} ms); "
              f"store p50 {entry['store_p50_ms']:6.0f} ms (refresh off "
              f"{entry['reader_store_p50_ms']:6.0f} ms)", flush=True)


# ---------------------------------------------------------------- report
def print_report(result: dict) -> None:
    load = result["load"]
    print(f"\nload: {sum(x['metrics'] for x in load):,} metric rows, "
          f"{sum(x['cells'] for x in load):,} cells, {sum(x['curves'] for x in load):,} curves "
          f"in {sum(x['total_s'] for x in load):.1f} s (COPY {sum(x['copy_s'] for x in load):.1f}"
          f" s, ANALYZE {sum(x['analyze_s'] for x in load):.1f} s)")
    n, m = result["small"], result["full"]
    small, full = result["phases"][str(n)], result["phases"][str(m)]
    print(f"\nwith {m} objectives; queries: cold/warm, and at {n} objectives; "
          f"others: CPU share of other processes during the warm requests")
    print(f"{'page':<26} {'cold ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'target':>6} "
          f"{'queries':>8} {f'at {n}':>8} {'grows':>5} {'KB':>6} {'others':>6}")
    for name, e in full.items():
        if name.startswith("_"):
            continue
        if "error" in e:
            print(f"{name:<26} ERROR {e['error']}")
            continue
        s = small.get(name, {})
        here = f"{e.get('cold_queries')}/{e.get('warm_queries')}"
        there = f"{s.get('cold_queries')}/{s.get('warm_queries')}"
        ok = "ok" if e["p95_ms"] < TARGET_P95_MS else "MISS"
        print(f"{name:<26} {e['cold_ms']:9.0f} {e['p50_ms']:8.1f} {e['p95_ms']:8.1f} {ok:>6} "
              f"{here:>8} {there:>8} {'no' if here == there else 'YES':>5} "
              f"{e['bytes'] / 1024:6.0f} {e['others_cpu_share']:6.0%}")
    how = ("cache emptied before each page" if result["config"]["isolated_cold"]
           else "cache emptied once, pages requested in this order")
    print(f"cold requests in all: {full['_cold_total_s']['seconds']:.1f} s ({how})")
    print(f"target: warm p95 < {TARGET_P95_MS:.0f} ms server-side; query count independent of "
          f"the number of objectives ({n} vs {m})")
    landed = [(name, e) for name, e in full.items()
              if not name.startswith("_") and "landing_p95_ms" in e]
    if landed:
        print(f"\nafter a landing ({result['config']['landings']} requests per page, each just "
              f"after one new cell was stored, half in the page's variant): server-side ms; "
              f"'refresh off': the same with HARNESS_REFRESH_PAGES=0 (the first reader "
              f"rebuilds); 'store': the writer's time to store the cell and refresh")
        print(f"{'page':<26} {'cold ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} "
              f"{'target':>6} {'cold/p95':>9} {'off p95':>8} {'off/on':>7} {'store':>7} "
              f"{'off':>6}")
        for name, e in landed:
            ok = "ok" if e["landing_p95_ms"] < TARGET_LANDING_MS else "MISS"
            print(f"{name:<26} {e['cold_ms']:9.0f} {e['landing_p50_ms']:8.1f} "
                  f"{e['landing_p95_ms']:8.1f} {e['landing_max_ms']:8.1f} {ok:>6} "
                  f"{e['cold_over_landing']:8.1f}× {e['reader_landing_p95_ms']:8.0f} "
                  f"{e['reader_over_landing']:6.1f}× {e['store_p50_ms']:7.0f} "
                  f"{e['reader_store_p50_ms']:6.0f}")
        print(f"target: p95 < {TARGET_LANDING_MS:.0f} ms just after a cell lands; cold = the "
              f"uncached computation of the same page in this run ({how})")
    for name, e in full.items():
        if "profile" not in e:
            continue
        print(f"\nprofile of {name} ({e['url']}): warm p95 {e['p95_ms']:.0f} ms, "
              f"SQL {e['warm_sql_ms']:.0f} ms of one request")
        for q in e["profile"]["slow_sql"]:
            print(f"  sql {q['ms']:7.1f} ms  {q['sql'][:150]}")
        for f in e["profile"]["functions"][:8]:
            print(f"  {f['cumtime_ms']:7.1f} ms cum {f['tottime_ms']:7.1f} ms self "
                  f"{f['calls']:>7} calls  {f['function']}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    setup(args)
    small = min(SMALL, args.objectives)
    result = {"config": {k: v for k, v in vars(args).items() if k not in ("json", "admin_url")},
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "platform": platform.platform()},
              "small": small, "full": args.objectives, "load": [], "phases": {}}
    try:
        print(f"loading {small} objectives × {args.variants} variants × {args.seeds} seeds × "
              f"{args.metrics} metrics", flush=True)
        result["load"].append(load(args, 0, small))
        print(f"measuring with {small} objectives", flush=True)
        result["phases"][str(small)] = measure(args, small, args.small_repeats)
        if args.objectives > small:
            print(f"loading objectives {small}..{args.objectives - 1}", flush=True)
            result["load"].append(load(args, small, args.objectives))
            print(f"measuring with {args.objectives} objectives", flush=True)
            result["phases"][str(args.objectives)] = measure(args, args.objectives, args.repeats)
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            drop_database(args.admin_url, args.database)
    result["wall_s"] = time.perf_counter() - started
    print_report(result)
    print(f"\ntotal {result['wall_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
