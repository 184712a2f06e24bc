"""How often the aggregate's 95% interval (harness/report/aggregate.py) holds its target, at
the seed counts the suites use, by simulation.

Each trial draws an objective's normalized scores on two suites (three variants and one),
``n`` seeds each, from a known distribution, and asks whether the stratified bootstrap
interval holds the expected value of the aggregate at that ``n`` (the IQM is a trimmed
mean: at 5 seeds its expectation is not the population's IQM, and the interval is an
interval for the statistic the page shows). Distributions: normal seeds, and a
"sometimes diverges" mixture (70% near 0.7, 30% near 0.3).

    python bench/aggregate_coverage.py            # 400 trials per case (about 2 minutes)
    python bench/aggregate_coverage.py --smoke    # 20 trials, to check that it runs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.report.aggregate import aggregate  # noqa: E402
from harness.report.stats import iqm  # noqa: E402

VARIANTS = 3  # on the first suite; the second has one


def draw(rng: np.random.Generator, kind: str, size: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0.7, 0.05, size)
    return np.where(rng.random(size) < 0.7, rng.normal(0.7, 0.03, size),
                    rng.normal(0.3, 0.05, size))


def scores(rng: np.random.Generator, kind: str, n: int) -> dict:
    return {"a": {f"v{i}": draw(rng, kind, n) for i in range(VARIANTS)},
            "b": {"v": draw(rng, kind, n)}}


def point(s: dict) -> float:
    return float(np.mean([iqm(np.concatenate(list(v.values()))) for v in s.values()]))


def coverage(kind: str, n: int, trials: int, replicates: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    target = float(np.mean([point(scores(rng, kind, n)) for _ in range(20 * trials)]))
    hits, widths = 0, []
    for t in range(trials):
        agg = aggregate(scores(rng, kind, n), replicates=replicates, seed=t)
        hits += agg.ci_low <= target <= agg.ci_high
        widths.append(agg.ci_high - agg.ci_low)
    share = hits / trials
    return {"coverage": share, "standard_error": float(np.sqrt(share * (1 - share) / trials)),
            "mean_width": float(np.mean(widths)), "trials": trials}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    trials, replicates = (20, 200) if args.smoke else (400, 1000)
    report = {f"{kind}, {n} seeds": coverage(kind, n, trials, replicates, seed=n)
              for kind in ("normal", "mixture") for n in (5, 10)}
    for case, r in report.items():
        print(f"{case:22s} coverage {r['coverage']:.3f} ± {r['standard_error']:.3f} "
              f"(nominal 0.95), mean width {r['mean_width']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
