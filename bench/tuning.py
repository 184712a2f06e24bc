"""Trials as a batch dimension: a tuned run's ``k`` trials trained as one stacked run,
against the same trials trained one after another, on the same core.

The noisy-labels suite's real training (digits, 40% symmetric noise, its MLP, SGD with a
cosine schedule, 100 epochs) with GCE: ``k`` trials drawn by the tuned protocol's sampler
over the suite's learning rate and weight decay and GCE's ``q``
(:mod:`harness.objectives.search`), each with ``--seeds`` seeds. Batched, the ``k·seeds``
members carry their own learning rate, weight decay and ``q`` (``harness.train.config.
PerMember``: ``q`` reaches the loss as a tensor under ``vmap``); one by one, each trial's
seeds train alone with the same per-member path. Timed interleaved (batched, then one by
one, ``--repeats`` times; medians), one torch thread, and the final weights compared bit
for bit.

    .venv/bin/python bench/tuning.py                  # k=8, 1 and 2 seeds, 3 repeats (~6 min)
    .venv/bin/python bench/tuning.py --smoke          # what the tests run (2 trials, 2 epochs)
    .venv/bin/python bench/tuning.py --json OUT       # also write the figures as JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _setup(epochs: int):
    import numpy as np
    import torch

    from harness.contract.registry import all_suites
    from harness.train import TrainConfig
    from suites.noisy_labels.pipeline import _model, load_dataset, noisy_labels

    suite = next(s for s in all_suites() if s.name == "noisy-labels")
    variant = suite.variant("sym-0.4")
    data = load_dataset("digits", None, False)
    config = dataclasses.replace(TrainConfig.from_settings(suite.settings), epochs=epochs)
    x = torch.from_numpy(data.x_train)
    model = _model(x, data.num_classes)

    def labels(seeds):
        return torch.from_numpy(np.stack([noisy_labels(data, variant, s) for s in seeds]))

    return suite, config, x, model, labels


def _train(trials, seeds, setup, objective):
    from harness.train import (
        Shuffled,
        classification_member_loss,
        stacked_init,
        train_members,
    )
    from harness.train.config import PerMember

    suite, config, x, model, labels = setup
    members = [(t, s) for t in trials for s in seeds]
    per_member = PerMember(
        lr=tuple(t[0]["lr"] for t, _ in members),
        weight_decay=tuple(t[0]["weight_decay"] for t, _ in members),
        hyper={name: tuple(t[1][name] for t, _ in members) for name in trials[0][1]})
    member_seeds = [s for _, s in members]
    return train_members(
        classification_member_loss(model, objective.bind("classification_loss")),
        stacked_init(model, member_seeds),
        Shuffled(member_seeds, config.batch_size, config.epochs, shared={"x": x},
                 own={"y": labels(member_seeds)}),
        config, per_member=per_member)


def measure(k: int, seeds: int, epochs: int, repeats: int) -> dict:
    import torch

    from harness.objectives.loading import load_objective
    from harness.objectives.search import trials as draw

    setup = _setup(epochs)
    suite = setup[0]
    objective = load_objective("gce")
    hyper = objective.dimensions or _fallback_space()
    trials = draw(suite.tuning.dimensions(), hyper, k, suite.tuning.seed)
    seed_list = list(range(1000, 1000 + seeds))  # the search's seeds, apart from the final ones
    batched_times, single_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        batched = _train(trials, seed_list, setup, objective)
        batched_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        singles = [_train([t], seed_list, setup, objective) for t in trials]
        single_times.append(time.perf_counter() - start)
    identical = all(torch.equal(batched.params[n], torch.cat([r.params[n] for r in singles]))
                    for n in batched.params)
    largest = max(float((batched.params[n] - torch.cat([r.params[n] for r in singles]))
                        .abs().max()) for n in batched.params)
    b, s = statistics.median(batched_times), statistics.median(single_times)
    return {"k": k, "seeds_per_trial": seeds, "members": k * seeds, "epochs": epochs,
            "mode": batched.mode, "batched_s": b, "one_by_one_s": s, "ratio": s / b,
            "batched_runs": batched_times, "one_by_one_runs": single_times,
            "identical": identical, "max_abs_difference": largest,
            "trials": [{**t[0], **t[1]} for t in trials]}


def _fallback_space():
    """GCE's range where the built-in declares none yet (Zhang & Sabuncu 2018: q in
    (0, 1], 0.7 in their experiments)."""
    from harness.objectives.search import parse

    return parse({"q": {"low": 0.1, "high": 1.0}})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.smoke:
        args.k, args.seeds, args.epochs, args.repeats = 2, [1], 2, 1
    rows = [measure(args.k, s, args.epochs, args.repeats) for s in args.seeds]
    print("| trials × seeds | batched | one by one | ratio | identical weights |")
    print("|---|---|---|---|---|")
    for r in rows:
        same = "yes" if r["identical"] else f"no, max |Δ| = {r['max_abs_difference']:.2e}"
        print(f"| {r['k']} × {r['seeds_per_trial']} ({r['mode']}) | {r['batched_s']:.2f} s | "
              f"{r['one_by_one_s']:.2f} s | {r['ratio']:.2f}× | {same} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
