"""How long the full sweep takes: every suite's default run (all its baselines, its default
variants, 5 seeds), suite by suite, on an empty results database, with the fixture build
timed apart (it is paid once per machine: the entries are cached).

    python bench/sweep.py --json sweep.json                     # every suite (over an hour)
    python bench/sweep.py --suites tta certified --json s.json  # some of them
    python bench/sweep.py --smoke --json smoke.json             # what the tests run

Per suite it reports the fixtures' seconds (building what is missing, each in a worker
process), the run's wall seconds (``harness.api.run``: groups spread over one process per
core, the cells stored), the cells trained and the wall seconds per cell, and the sum.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def sweep(names: list[str], *, seeds: int, smoke: bool) -> dict:
    from harness import api
    from harness.contract.registry import get_suite
    from harness.runner.jobs import prepare_fixtures
    from harness.runner.processes import default_workers

    out = {}
    for name in names:
        suite = get_suite(name)
        objectives = list(suite.baselines)[:2] if smoke else list(suite.baselines)
        variants = suite.default_variants[:1] if smoke else suite.default_variants
        epochs = 1 if smoke else None
        start = time.perf_counter()
        built = prepare_fixtures(suite, [suite.variant(v) for v in variants],
                                 list(range(seeds)), workers=default_workers())
        fixtures_s = time.perf_counter() - start
        start = time.perf_counter()
        api.run(name, objectives, variants=variants, seeds=seeds, epochs=epochs,
                progress=False, say=lambda message: None)
        run_s = time.perf_counter() - start
        cells = len(objectives) * len(variants) * seeds
        out[name] = {"objectives": len(objectives), "variants": len(variants), "seeds": seeds,
                     "cells": cells, "fixtures": built, "fixtures_s": round(fixtures_s, 1),
                     "run_s": round(run_s, 1), "per_cell_s": round(run_s / cells, 2)}
        print(f"{name:<16} {len(objectives):>2} objectives × {len(variants)} variants × "
              f"{seeds} seeds: run {run_s:7.1f} s ({run_s / cells:5.2f} s per cell), "
              f"fixtures {fixtures_s:6.1f} s ({built or 'none'})", flush=True)
    total = sum(r["run_s"] for r in out.values())
    print(f"{'total':<16} run {total:.1f} s = {total / 60:.1f} min, fixtures "
          f"{sum(r['fixtures_s'] for r in out.values()):.1f} s")
    return {"suites": out, "run_s": round(total, 1), "workers": default_workers()}


def main() -> None:
    from harness.contract.registry import suite_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", choices=suite_names(), default=suite_names())
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true",
                        help="noisy-labels alone: two baselines, one variant, one epoch, two seeds")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    names = args.suites if not args.smoke else ["noisy-labels"]
    seeds = 2 if args.smoke else args.seeds
    with tempfile.TemporaryDirectory() as home:
        os.environ["HARNESS_HOME"] = home  # an empty results database: nothing is reused
        os.environ.pop("DATABASE_URL", None)
        report = sweep(names, seeds=seeds, smoke=args.smoke)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
