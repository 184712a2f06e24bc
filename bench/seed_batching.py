"""Is training seeds as a batch dimension worth it, and how close does the trainer get to
the machine's matrix-multiply rate? Times the real trainer (harness.train) on the
noisy-label suite's workload, side by side with the naive alternatives, in one run.

Workload: scikit-learn digits 1000/797, MLP 64-256-256-10, the suite's settings (SGD 0.9,
lr 0.05 cosine, batch 64, clip 5), built-in ``ce``, labels of one variant per seed, the
per-epoch test predictions the pipeline makes. Every timed run uses one torch thread per
process unless it says otherwise.

Sections (``--only``):

- ``compare``  on one core: one batched ``train_members`` call for S seeds against S
  one-seed calls (the per-seed loop) and the trainer's own per-member loop
  (``mode="loop"``); on two cores: batched with 2 threads against the per-seed loop with 2
  threads, and 2 one-thread processes each batching S/2 seeds (how ``harness run`` and the
  workers use the cores) against the per-seed loop spread over 2 processes; ratios to the
  per-seed loop on the same cores; final predictions checked identical across all.
- ``flops``    analytic FLOPs of the run (forward 2·B·Σ fan_in·fan_out per member,
  training ×3, plus the per-epoch predictions) over the batched wall time, against the
  measured one-thread rate of a 1024² float32 matmul.
- ``layouts``  the ``rows`` (row-major, the suites' v1.0) against the ``columns`` weight
  layout: ms per step, speedup, agreement of final predictions (not bitwise: see
  harness/train/config.py).
- ``compile``  torch.compile (inductor) of the vmapped member loss: cold and warm compile
  time, ms per step, whether the numbers are identical. Not used by the trainer (see
  bench/README.md); measured so the decision can be revisited.
- ``sweep``    ms per step and per member-epoch for S in ``--sweep``.
- ``chunks``   canonical member chunks (harness/contract/chunks.py) against batching everything
  asked for: the CLI's run of one objective (7 variants × 5 seeds = 35 members) as one
  batch or as 7 chunks of 5, in one process and spread over 2 (3 and 4 variants, as
  ``harness run`` spreads them); and a rerun of one seed (1 member, or its chunk of 5).
  Repeats interleaved; final predictions of the chunked run checked against the whole
  run's (equal for ce, which has no position-dependent op).

``--smoke`` runs every section but ``compile`` on 4 seeds for 1 epoch, ``compare`` and
``chunks`` on one pool of worker processes (the test suite runs it so this file cannot
rot). ``--json OUT`` writes every measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.contract.registry import get_suite  # noqa: E402
from harness.objectives.loading import load_objective  # noqa: E402
from harness.train import (  # noqa: E402
    Shuffled,
    TrainConfig,
    classification_member_loss,
    predict,
    stacked_init,
    train_members,
)
from suites.noisy_labels.pipeline import load_dataset, model_for, noisy_labels  # noqa: E402

SECTIONS = ("compare", "flops", "layouts", "compile", "sweep", "chunks")


class Workload:
    """The suite's data, one label row per seed, ce, the suite's settings."""

    def __init__(self, labels: str, max_seeds: int, epochs: int):
        suite = get_suite("noisy-labels")
        self.config = TrainConfig.from_settings({**suite.settings, "epochs": epochs})
        self.data = load_dataset("digits", None, False)
        variant = suite.variant(labels)
        self.labels = torch.from_numpy(np.stack(
            [noisy_labels(self.data, variant, s) for s in range(max_seeds)]))
        self.x = torch.from_numpy(self.data.x_train)
        self.x_eval = torch.from_numpy(self.data.x_test)
        self.loss = load_objective("ce").bind("classification_loss")

    def sizes(self) -> list[tuple[int, int]]:
        return [(m.in_features, m.out_features) for m in model_for(self.data)
                if isinstance(m, torch.nn.Linear)]

    def steps(self) -> int:
        return math.ceil(len(self.x) / self.config.batch_size) * self.config.epochs

    def train(self, seeds: list[int], *, mode: str = "vmap", layout: str = "rows",
              epochs: int | None = None):
        config = TrainConfig(**{**self.config.__dict__, "weight_layout": layout,
                                "epochs": epochs or self.config.epochs})
        model = model_for(self.data)
        return train_members(
            classification_member_loss(model, self.loss), stacked_init(model, seeds),
            Shuffled(seeds, config.batch_size, config.epochs, shared={"x": self.x},
                     own={"y": self.labels[seeds]}),
            config, mode=mode, evaluate=lambda p: predict(model, p, self.x_eval))


def timed(fn, repeats: int) -> tuple[list[float], object]:
    """Wall seconds of ``repeats`` calls and the last result."""
    out = None
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times, out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def load() -> float:
    return os.getloadavg()[0]


# --- compare ----------------------------------------------------------------------------

_W: dict = {}


def _worker_init(labels: str, seeds: int, epochs: int) -> None:
    torch.set_num_threads(1)
    _W["work"] = Workload(labels, seeds, epochs)
    _W["work"].train([0], epochs=1)  # first-call costs, outside the timing


def _worker_ready(_: int) -> int:
    time.sleep(0.3)  # long enough that both workers take one: both are started and warm
    return os.getpid()


def _worker_group(seeds: list[int]) -> torch.Tensor:
    return _W["work"].train(seeds).evaluations[-1]


def _worker_chunks(parts: list[list[int]]) -> torch.Tensor:
    return torch.cat([_W["work"].train(p).evaluations[-1] for p in parts])


def _pool(labels: str, seeds: int, epochs: int) -> ProcessPoolExecutor:
    """Two one-thread worker processes holding the workload, started and warm."""
    context = multiprocessing.get_context("forkserver")
    pool = ProcessPoolExecutor(2, mp_context=context, initializer=_worker_init,
                               initargs=(labels, seeds, epochs))
    list(pool.map(_worker_ready, range(4)))
    return pool


def compare(work: Workload, seeds: list[int], repeats: int, report: dict,
            pool: ProcessPoolExecutor | None = None) -> None:
    """``pool``: warm workers holding this workload (the smoke run's, shared with
    ``chunks``); by default a pool of its own."""
    torch.set_num_threads(1)
    batched_t, batched = timed(lambda: work.train(seeds), repeats)
    final = batched.evaluations[-1]

    def per_seed():
        return torch.cat([work.train([s]).evaluations[-1] for s in seeds])

    loop_t, loop_pred = timed(per_seed, repeats)
    own_loop_t, own_loop = timed(lambda: work.train(seeds, mode="loop"), repeats)
    torch.set_num_threads(2)
    two_t, two = timed(lambda: work.train(seeds), repeats)
    loop2_t, loop2_pred = timed(per_seed, repeats)
    torch.set_num_threads(1)
    halves = [seeds[:len(seeds) // 2], seeds[len(seeds) // 2:]]
    singles = [[s] for s in seeds]
    own = pool is None
    if own:
        pool = _pool(report["labels"], len(seeds), work.config.epochs)
    try:
        procs_t, procs = timed(lambda: torch.cat(list(pool.map(_worker_group, halves))),
                               repeats)
        naive_t, naive = timed(lambda: torch.cat(list(pool.map(_worker_group, singles))),
                               repeats)
    finally:
        if own:
            pool.shutdown()
    # (name, resources, seconds, final predictions); ratios against the per-seed loop on
    # the same resources
    rows = [
        ("per-seed loop (S calls)", "1 core", loop_t, loop_pred),
        ("batched", "1 core", batched_t, final),
        ("trainer's own loop (mode=loop)", "1 core", own_loop_t, own_loop.evaluations[-1]),
        ("per-seed loop (S calls), 2 threads", "2 cores", loop2_t, loop2_pred),
        ("batched, 2 threads", "2 cores", two_t, two.evaluations[-1]),
        ("per-seed loop over 2 processes", "2 cores", naive_t, naive),
        ("batched, 2 processes x S/2 seeds", "2 cores", procs_t, procs),
    ]
    base = {"1 core": med(loop_t), "2 cores": med(naive_t)}
    print(f"\n== compare: {len(seeds)} seeds x {work.config.epochs} epochs, "
          f"medians of {repeats} (load {load():.2f}); one thread per process unless said")
    print(f"  {'how':36s} {'uses':>8s} {'wall s':>8s} {'vs per-seed loop':>17s} "
          f"{'identical preds':>16s}")
    report["compare"] = {}
    for name, uses, times, pred in rows:
        same = float((pred == final).double().mean())
        ratio = base[uses] / med(times)
        print(f"  {name:36s} {uses:>8s} {med(times):8.2f} {ratio:16.2f}x {same:16.5f}")
        report["compare"][name] = {"uses": uses, "seconds": times, "speedup_vs_loop": ratio,
                                   "same_predictions": same}


# --- flops ------------------------------------------------------------------------------


def matmul_rate(threads: int = 1, n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of the best of ``repeats`` n×n float32 matmuls with ``threads`` threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_time(lambda: a @ b) for _ in range(repeats))
    torch.set_num_threads(before)
    return 2 * n ** 3 / best


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def flops(work: Workload, seeds: list[int], repeats: int, report: dict) -> None:
    """Achieved FLOP/s of the batched run against the matmul rate, with 1 and 2 threads
    (one process per core is how the harness runs; 2 threads is the earlier baseline)."""
    per_sample = 2 * sum(i * o for i, o in work.sizes())
    m = len(seeds)
    train = 3 * per_sample * len(work.x) * work.config.epochs * m
    evaluate = per_sample * len(work.x_eval) * work.config.epochs * m
    print(f"\n== flops: {m} members, {work.config.epochs} epochs; training "
          f"{train / 1e9:.2f} GFLOP + per-epoch predictions {evaluate / 1e9:.2f} GFLOP")
    report["flops"] = {"gflop": (train + evaluate) / 1e9}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        times, _ = timed(lambda: work.train(seeds), repeats)
        rate = matmul_rate(threads)
        achieved = (train + evaluate) / med(times)
        step_ms = 1e3 * med(times) / work.steps()
        print(f"  {threads} thread{'s' if threads > 1 else ' '}: {step_ms:6.2f} ms per step, "
              f"{achieved / 1e9:5.1f} GFLOP/s = {achieved / rate:.0%} of a {threads}-thread "
              f"1024^2 matmul ({rate / 1e9:.1f} GFLOP/s)")
        report["flops"][f"{threads}_threads"] = {
            "seconds": times, "achieved_gflops": achieved / 1e9, "matmul_gflops": rate / 1e9,
            "share_of_matmul": achieved / rate, "ms_per_step": step_ms}
    torch.set_num_threads(1)
    report["flops"]["share_of_matmul"] = report["flops"]["1_threads"]["share_of_matmul"]


# --- layouts ----------------------------------------------------------------------------


def layouts(work: Workload, seeds: list[int], repeats: int, report: dict) -> None:
    torch.set_num_threads(1)
    out = {}
    for layout in ("rows", "columns"):
        times, result = timed(lambda layout=layout: work.train(seeds, layout=layout), repeats)
        out[layout] = (times, result.evaluations[-1])
    rows_s, cols_s = med(out["rows"][0]), med(out["columns"][0])
    same = float((out["rows"][1] == out["columns"][1]).double().mean())
    print(f"\n== layouts: {len(seeds)} members, {work.config.epochs} epochs")
    for layout, (times, _) in out.items():
        print(f"  {layout:8s} {1e3 * med(times) / work.steps():8.2f} ms/step")
    print(f"  columns is {rows_s / cols_s:.2f}x rows; final predictions agree on {same:.2%} "
          f"(float rounding: not bitwise)")
    report["layouts"] = {k: {"seconds": v[0]} for k, v in out.items()}
    report["layouts"]["speedup_columns"] = rows_s / cols_s
    report["layouts"]["same_predictions"] = same


# --- compile ----------------------------------------------------------------------------


def compile_section(work: Workload, seeds: list[int], report: dict) -> None:
    """torch.compile of the vmapped member loss (forward + loss; backward through AOT)."""
    import tempfile

    from torch.func import vmap

    from harness.train import loop

    torch.set_num_threads(1)
    original = loop._vmapped_step
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache

        def compiled_step(member_loss):
            def reduced(p, batch, state, progress):
                return loop.reduce_loss(member_loss(p, batch, state, progress))
            return torch.compile(vmap(reduced, in_dims=(0, 0, 0, None)), dynamic=False)

        for label in ("cold", "warm"):
            torch._dynamo.reset()
            loop._vmapped_step = compiled_step
            try:
                t = time.perf_counter()
                first = work.train(seeds, epochs=1)
                compile_s = time.perf_counter() - t
                times, result = timed(lambda: work.train(seeds), 1)
            finally:
                loop._vmapped_step = original
            out[label] = {"first_epoch_s": compile_s, "seconds": times}
            del first
        eager_t, eager = timed(lambda: work.train(seeds), 1)
    same = float((eager.evaluations[-1] == result.evaluations[-1]).double().mean())
    identical = all(torch.equal(eager.params[k], result.params[k]) for k in eager.params)
    ratio = med(eager_t) / med(out["warm"]["seconds"])
    print(f"\n== compile: first epoch {out['cold']['first_epoch_s']:.1f} s cold, "
          f"{out['warm']['first_epoch_s']:.1f} s with the on-disk cache; steady state "
          f"{ratio:.2f}x eager; identical numbers: {identical} (predictions agree on "
          f"{same:.2%})")
    report["compile"] = {**out, "eager_seconds": eager_t, "speedup": ratio,
                         "identical": identical, "same_predictions": same}


# --- sweep ------------------------------------------------------------------------------


def sweep(work: Workload, sizes: list[int], epochs: int, report: dict) -> None:
    torch.set_num_threads(1)
    steps = math.ceil(len(work.x) / work.config.batch_size) * epochs
    print(f"\n== sweep: {epochs} epochs")
    print(f"  {'members':>7s} {'ms/step':>8s} {'ms per member-epoch':>20s}")
    report["sweep"] = {}
    for s in sizes:
        times, _ = timed(lambda s=s: work.train(list(range(s)), epochs=epochs), 1)
        w = med(times)
        print(f"  {s:7d} {w / steps * 1e3:8.2f} {w / s / epochs * 1e3:20.2f}")
        report["sweep"][s] = {"seconds": w, "ms_per_step": w / steps * 1e3}


# --- chunks -----------------------------------------------------------------------------


def interleaved(fns: dict[str, object], repeats: int) -> dict[str, tuple[list[float], object]]:
    """``timed`` for each of ``fns``, their repeats interleaved (a shared machine drifts)."""
    out: dict[str, tuple[list[float], object]] = {k: ([], None) for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times, result = timed(fn, 1)
            out[name] = (out[name][0] + times, result)
    return out


def chunks_section(work: Workload, members: int, size: int, repeats: int,
                   report: dict, pool: ProcessPoolExecutor | None = None) -> None:
    """``pool``: as for :func:`compare`."""
    torch.set_num_threads(1)
    seeds = list(range(members))
    parts = [seeds[i:i + size] for i in range(0, members, size)]
    half = len(parts) // 2
    one = interleaved({
        "one batch": lambda: work.train(seeds).evaluations[-1],
        "chunks": lambda: torch.cat([work.train(p).evaluations[-1] for p in parts]),
        "one seed alone": lambda: work.train([0]).evaluations[-1],
        "one seed's chunk": lambda: work.train(parts[0]).evaluations[-1]}, repeats)
    own = pool is None
    if own:
        pool = _pool(report["labels"], members, work.config.epochs)
    try:
        two = interleaved({
            "one batch": lambda: torch.cat(list(pool.map(
                _worker_group, [sum(parts[:half], []), sum(parts[half:], [])]))),
            "chunks": lambda: torch.cat(list(pool.map(
                _worker_chunks, [parts[:half], parts[half:]])))}, repeats)
    finally:
        if own:
            pool.shutdown()
    print(f"\n== chunks: {members} members ({len(parts)} chunks of {size}), "
          f"{work.config.epochs} epochs, medians of {repeats} (load {load():.2f})")
    report["chunks"] = {"members": members, "size": size}
    rows = [("1 process", one["one batch"], one["chunks"]),
            ("2 processes", two["one batch"], two["chunks"]),
            ("rerun of one seed", one["one seed alone"], one["one seed's chunk"])]
    for name, (before_t, before), (after_t, after) in rows:
        ratio = med(after_t) / med(before_t)
        same = (float((before == after).double().mean()) if before.shape == after.shape
                else None)
        print(f"  {name:18s} batched {med(before_t):7.2f} s  chunked {med(after_t):7.2f} s  "
              f"= {ratio:.3f}x" + (f"  identical preds {same:.5f}" if same is not None else ""))
        report["chunks"][name] = {"batched_seconds": before_t, "chunked_seconds": after_t,
                                  "ratio": ratio, "same_predictions": same}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--labels", default="sym-0.4")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="compare,flops,layouts,sweep,chunks",
                    help=f"sections, comma-separated, from {','.join(SECTIONS)}")
    ap.add_argument("--sweep", default="1,4,16,35,64")
    ap.add_argument("--sweep-epochs", type=int, default=10)
    ap.add_argument("--chunk-members", type=int, default=35,
                    help="members of the chunks section's run (7 variants x 5 seeds)")
    ap.add_argument("--chunk", type=int, default=5, help="seeds per chunk")
    ap.add_argument("--smoke", action="store_true", help="tiny run of every section")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    sections = args.only.split(",")
    if args.smoke:
        args.epochs, args.seeds, args.repeats, args.sweep_epochs = 1, 4, 1, 1
        args.sweep, args.chunk_members, args.chunk = "1,4", 4, 2
        sections = [s for s in sections if s != "compile"]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}")
    seeds = list(range(args.seeds))
    sizes = [int(s) for s in args.sweep.split(",")]
    work = Workload(args.labels, max(args.seeds, args.chunk_members, *sizes), args.epochs)
    report: dict = {"labels": args.labels, "seeds": args.seeds, "epochs": args.epochs,
                    "torch": torch.__version__, "cpus": len(os.sched_getaffinity(0)),
                    "load_at_start": load()}
    print(f"seed batching bench: {args.seeds} seeds, {args.epochs} epochs, {args.labels}, "
          f"torch {torch.__version__}, load {load():.2f}")
    # The smoke run's sections share one pool of workers (the same workload: 4 seeds, 4
    # chunk members): starting one takes seconds, and the smoke run times nothing.
    shared = (_pool(args.labels, max(args.seeds, args.chunk_members), args.epochs)
              if args.smoke and {"compare", "chunks"} <= set(sections) else None)
    try:
        _sections(work, args, sections, seeds, sizes, report, shared)
    finally:
        if shared is not None:
            shared.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float))
    return report


def _sections(work: Workload, args: argparse.Namespace, sections: list[str],
              seeds: list[int], sizes: list[int], report: dict,
              pool: ProcessPoolExecutor | None) -> None:
    if "compare" in sections:
        compare(work, seeds, args.repeats, report, pool)
    if "flops" in sections:
        flops(work, seeds, args.repeats, report)
    if "layouts" in sections:
        layouts(work, seeds, args.repeats, report)
    if "compile" in sections:
        compile_section(work, seeds, report)
    if "sweep" in sections:
        sweep(work, sizes, args.sweep_epochs, report)
    if "chunks" in sections:
        chunks_section(work, args.chunk_members, args.chunk, args.repeats, report, pool)


if __name__ == "__main__":
    main()
