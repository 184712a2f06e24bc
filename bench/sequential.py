"""Seeds where the verdict is undecided: the group-sequential rule (harness/report/sequential.py)
against fixed designs, by simulation.

The rule looks at 5, 10, 15 and 20 seeds and adds 5 only while the paired comparison with the
reference is undecided (O'Brien–Fleming-type spending, two-sided α = 0.05, paired t-test at
each look). Fixed designs: always 20 seeds, and always 5 (the plain paired t-test at α).
Per-seed differences objective − reference are ``effect + σ·X``, X of mean 0 and sd 1:
normal; log-normal (exp(0.5·N), skewness +1.75); a 70/30 "sometimes diverges" mixture
(bimodal, skewness −0.88). Effects 0, 0.25σ, 0.5σ, 1σ, 2σ. At effect 0 "better" is the
false-"better" rate (nominal ≤ 2.5%) and better + worse the two-sided error (nominal ≤ 5%);
above 0, "better" is the power. Also the uncalibrated rule (nominal p-values of the z
boundaries used as they are) at effect 0, normal.

    python bench/sequential.py            # 10^6 draws per cell (about 20 s, 1 thread)
    python bench/sequential.py --smoke    # 2,000 draws per cell, to check that it runs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.report.sequential import (  # noqa: E402
    DISTRIBUTIONS,
    Design,
    boundaries,
    calibrated_level,
    simulate,
)

SEQUENTIAL = Design(start=5, step=5, cap=20)
DESIGNS = {"sequential 5+5→20": SEQUENTIAL, "fixed 20": Design(20, 1, 20),
           "fixed 5": Design(5, 1, 5)}
EFFECTS = (0.0, 0.25, 0.5, 1.0, 2.0)


def run(reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    cells = {f"{dist}, effect {effect:g}σ": {
        name: simulate(design, effect, 1.0, reps, rng, dist) for name, design in DESIGNS.items()}
        for dist in DISTRIBUTIONS for effect in EFFECTS}
    raw = simulate(SEQUENTIAL, 0.0, 1.0, reps, rng, "normal", calibrate=False)
    return {"design": {"looks": [5, 10, 15, 20], "alpha": SEQUENTIAL.alpha,
                       "calibrated_level": calibrated_level(SEQUENTIAL),
                       "p_thresholds": boundaries(SEQUENTIAL).tolist(),
                       "p_thresholds_uncalibrated": boundaries(SEQUENTIAL, calibrate=False)
                       .tolist()},
            "cells": cells, "uncalibrated, normal, effect 0σ": raw, "reps": reps}


def table(report: dict) -> str:
    pct = "{:.2f}".format
    head = ("| differences | effect | sequential: better / worse | mean seeds | "
            "fixed 20: better / worse | fixed 5: better / worse |")
    lines = [head, "|---|---|---|---|---|---|"]
    for case, row in report["cells"].items():
        dist, effect = case.split(", effect ")
        s, f20, f5 = (row[name] for name in DESIGNS)
        lines.append(f"| {dist} | {effect} | {pct(100 * s['better'])} / {pct(100 * s['worse'])}"
                     f" | {s['mean_seeds']:.2f} | {pct(100 * f20['better'])} / "
                     f"{pct(100 * f20['worse'])} | {pct(100 * f5['better'])} / "
                     f"{pct(100 * f5['worse'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--reps", type=int, help="draws per cell (default 1,000,000; smoke 2,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    reps = args.reps or (2_000 if args.smoke else 1_000_000)
    report = run(reps, args.seed)
    d = report["design"]
    print(f"looks {d['looks']}, α = {d['alpha']}, z boundaries spend α' = "
          f"{d['calibrated_level']:.5f}; nominal p thresholds "
          + ", ".join(f"{p:.3g}" for p in d["p_thresholds"]))
    print(f"{reps:,} draws per cell; rates in %, better / worse\n")
    print(table(report))
    raw = report["uncalibrated, normal, effect 0σ"]
    print(f"\nuncalibrated (spending α itself), normal, effect 0: better "
          f"{100 * raw['better']:.2f}%, worse {100 * raw['worse']:.2f}%")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
