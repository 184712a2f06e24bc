"""Test-time adaptation: is adapting every seed as one vmapped batch worth it, and what
does the fixture cache save?

Times the TTA suite's real trainer (``suites.tta.pipeline``: prepare → train) on one
scenario with TENT, three ways on one torch thread: every seed in one ``Adapter`` under
``vmap`` (how the suite runs), one call per seed (the naive alternative), and the
adapter's own per-member loop (``mode="loop"``, what an unvmappable loss falls back to);
each checked to give the same predictions. Then the fixtures: building the digits-C pool
and the source models against loading them from the cache.

    .venv/bin/python bench/tta.py                 # 5 seeds, continual, 3 repeats (~2 min)
    .venv/bin/python bench/tta.py --smoke         # what the tests run (seconds; source
                                                  # models of 2 epochs for the cache's part)
    .venv/bin/python bench/tta.py --json OUT      # also write the figures as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def batching(variant: str, seeds: list[int], repeats: int) -> dict:
    import numpy as np

    from harness.contract.registry import get_suite, pipeline
    from harness.objectives.loading import load_objective

    suite = get_suite("tta")
    steps = pipeline(suite)
    tent = load_objective("tent")
    together = steps.prepare(suite, [suite.variant(variant)], seeds)[0]
    alone = [steps.prepare(suite, [suite.variant(variant)], [s])[0] for s in seeds]

    def batched(mode: str = "auto"):
        return steps.train(suite, tent, together.inputs, together.plan, mode=mode)

    def per_seed():
        return [steps.train(suite, tent, j.inputs, j.plan) for j in alone]

    t_batched, out = _timed(batched, repeats)
    t_loop, looped = _timed(lambda: batched("loop"), repeats)
    t_alone, outs = _timed(per_seed, repeats)
    probs = out.arrays["probs"]
    alone_probs = np.concatenate([o.arrays["probs"] for o in outs])
    return {
        "variant": variant, "seeds": len(seeds), "batches": len(together.plan["batches"]),
        "batched_s": t_batched, "per_seed_calls_s": t_alone, "member_loop_s": t_loop,
        "speedup_vs_per_seed_calls": t_alone / t_batched,
        "speedup_vs_member_loop": t_loop / t_batched,
        "same_predictions_per_seed_calls": float(
            (probs.argmax(-1) == alone_probs.argmax(-1)).mean()),
        "max_prob_difference_per_seed_calls": float(np.abs(probs - alone_probs).max()),
        "same_predictions_member_loop": float(
            (probs.argmax(-1) == looped.arrays["probs"].argmax(-1)).mean()),
    }


def fixture_cache(seeds: list[int], pool: bool = True, epochs: int | None = None) -> dict:
    """Build the fixtures in an empty cache, then load them again (``pool=False``: the
    source models only, as the smoke mode does: the pool takes most of the building;
    ``epochs``: source models trained that long instead of the suite's 40, as the smoke
    mode does: what it checks is the ledger, not the seconds)."""
    from harness.contract.registry import get_suite
    from harness.data import fixtures

    suite = get_suite("tta")
    wanted = ([("digits_c", None)] if pool else []) + [("source_model", s) for s in seeds]
    config = {"source_model": {"epochs": epochs} if epochs else None}

    def load_all(ledger: fixtures.Ledger) -> str:
        for name, seed in wanted:
            fixtures.load(suite, name, seed, config.get(name), ledger=ledger)
        return ledger.summary()

    before = os.environ.get(fixtures.ENV)
    with tempfile.TemporaryDirectory() as folder:
        os.environ[fixtures.ENV] = folder  # an empty cache of its own
        try:
            start = time.perf_counter()
            cold = load_all(fixtures.Ledger())
            t_cold = time.perf_counter() - start
            start = time.perf_counter()
            warm = load_all(fixtures.Ledger())
            t_warm = time.perf_counter() - start
        finally:
            if before is None:
                os.environ.pop(fixtures.ENV)
            else:
                os.environ[fixtures.ENV] = before
    return {"entries": len(wanted), "build_s": t_cold, "load_s": t_warm,
            "speedup": t_cold / t_warm, "cold": cold, "warm": warm}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.smoke:
        seeds, variant, repeats = [0, 1], "correlated", 1
    else:
        seeds, variant, repeats = [0, 1, 2, 3, 4], "continual", 3
    cache = fixture_cache(seeds, pool=not args.smoke, epochs=2 if args.smoke else None)
    report = {"fixtures": cache, "batching": batching(variant, seeds, repeats)}
    b, f = report["batching"], report["fixtures"]
    print(f"adaptation, {b['seeds']} seeds × {b['batches']} batches ({b['variant']}, TENT):")
    print(f"  batched (vmap)        {b['batched_s']:7.2f} s")
    print(f"  one call per seed     {b['per_seed_calls_s']:7.2f} s  "
          f"({b['speedup_vs_per_seed_calls']:.2f}× slower; same predictions: "
          f"{100 * b['same_predictions_per_seed_calls']:.2f}%)")
    print(f"  the member loop       {b['member_loop_s']:7.2f} s  "
          f"({b['speedup_vs_member_loop']:.2f}× slower; same predictions: "
          f"{100 * b['same_predictions_member_loop']:.2f}%)")
    print(f"fixtures ({f['entries']} entries): built in {f['build_s']:.1f} s, loaded in "
          f"{f['load_s']:.2f} s ({f['speedup']:.0f}×)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
