"""The certified suite's evaluation attack with and without its per-sample early stop.

PGD (100 steps × 5 restarts, suites/certified/attack.py) attacks the test digits of 5 stacked
seeds. A sample that every seed's model already misclassifies at some evaluated point is
broken whatever the later iterates do, so the attack can stop there. This bench trains the
suite's CE and IBP models (``harness.runner.jobs``, the suite's own training) and times
``pgd_evaluate`` on them both ways, in one process, alternating, best of ``--rounds``; it
fails unless both ways break exactly the same samples and agree on every margin of the
samples neither broke.

    .venv/bin/python bench/pgd.py [--json OUT]      # ~1 min on one core
    .venv/bin/python bench/pgd.py --smoke           # what the tests run (1 epoch, 5 steps)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = [("ce", "eps-0.1"), ("ce", "eps-0.05"), ("ibp", "eps-0.1"), ("ibp", "eps-0.05")]


def models(objective: str, variant: str, seeds: int, epochs: int | None):
    """The judge's inputs to PGD for ``objective`` trained on ``variant``."""
    from harness.contract import seeding
    from harness.contract.outputs import params_in
    from harness.contract.registry import get_suite, pipeline
    from harness.objectives.loading import load_objective
    from harness.runner.jobs import chunk_jobs, train_safely
    from suites.certified.attack import PGDConfig, pgd_evaluate
    from suites.certified.data import Box
    from suites.certified.evaluation import final_plain_params
    from suites.certified.training import model_for, reported_training

    suite = get_suite("certified")
    if epochs is not None:
        suite = suite.shortened(epochs)
    steps = pipeline(suite)
    (_, job), = list(chunk_jobs(steps, suite, [suite.variant(variant)], list(range(seeds))))
    output = train_safely(steps, suite, load_objective(objective), job.inputs, job.plan)
    assert not output.error, output.error
    data, v = job.private, suite.variant(variant)
    net = model_for(data, reported_training(output.info))
    shapes = [(n, tuple(p.shape)) for n, p in net.train.named_parameters()]
    alive = torch.ones(seeds, dtype=torch.bool)
    params = params_in(output.arrays, shapes, seeds, alive)
    plain = final_plain_params(net, params, torch.from_numpy(data.x_train))
    x, y = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    eps = v.config["eps"]
    box = Box.of(data, "cpu")
    lower, upper = box.limits(x, eps)
    pgd = PGDConfig(**suite.settings["pgd"])

    def attack(early_stop: bool, config: PGDConfig = pgd):  # as the judge calls it
        gens = [torch.Generator().manual_seed(seeding.stream_seed(s, "attack", variant))
                for s in range(seeds)]
        return pgd_evaluate(net.plain, plain, x, y, lower, upper, box.radius(eps), gens,
                            config, chunk=1024, early_stop=early_stop)

    return attack, pgd


def compare(objective: str, variant: str, *, seeds: int, epochs: int | None, rounds: int,
            steps: int | None) -> dict:
    attack, config = models(objective, variant, seeds, epochs)
    if steps is not None:
        config = dataclasses.replace(config, steps=steps)
    best = {True: float("inf"), False: float("inf")}
    results = {}
    for _ in range(rounds):
        for early in (False, True):
            start = time.perf_counter()
            results[early] = attack(early, config)
            best[early] = min(best[early], time.perf_counter() - start)
    full, fast = results[False], results[True]
    same_broken = bool(torch.equal(full.broken, fast.broken))
    kept = ~full.broken
    same_margins = bool(torch.equal(full.min_margins[kept], fast.min_margins[kept]))
    row = {"objective": objective, "variant": variant, "seeds": seeds,
           "broken_share": round(float(full.broken.float().mean()), 4),
           "full_s": round(best[False], 3), "early_stop_s": round(best[True], 3),
           "ratio": round(best[False] / best[True], 2),
           "same_broken": same_broken, "same_margins_unbroken": same_margins}
    print(f"{objective:>4} {variant:<9} broken {row['broken_share']:6.1%}  full "
          f"{row['full_s']:6.2f} s  early stop {row['early_stop_s']:6.2f} s  "
          f"{row['ratio']:4.2f}×  same broken: {same_broken}  same margins: {same_margins}",
          flush=True)
    return row


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="1 training epoch, 5 PGD steps")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    smoke = {"seeds": 5, "epochs": 1, "rounds": 1, "steps": 5} if args.smoke else {
        "seeds": 5, "epochs": None, "rounds": args.rounds, "steps": None}
    cases = CASES[:1] if args.smoke else CASES
    rows = [compare(o, v, **smoke) for o, v in cases]
    report = {"threads": 1, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if not all(r["same_broken"] and r["same_margins_unbroken"] for r in rows):
        raise SystemExit("early stop changed which samples PGD breaks")
    return report


if __name__ == "__main__":
    main()
