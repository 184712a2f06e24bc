"""Seed batching benchmark: is training S seeds as one stacked model worth it?

One run measures, on the noisy-label suite's real workload (digits, MLP 64-256-256-10,
the suite's Protocol, built-in CE through ``load_objective("ce")``):

1. batched      one ``train_members`` call with S members (mode="vmap"), 2 threads
2. per-seed     S sequential ``train_members`` calls with one member each (vmap, M=1)
   loop         the trainer's own fallback: ``mode="loop"`` with S members
3. processes    S single-member runs over 2 spawned workers, 1 thread each
   ... plus agreement of the final test predictions between them;
4. achieved FLOP/s of the batched run against measured matmul FLOP/s, and a
   per-phase profile of the batched step (a timed copy of the trainer's step);
5. step variants: copies of the step with one thing changed, timed against the copy;
6. a sweep over S to show how batching amortises the per-step overhead.

Nothing is asserted: this prints a report (and ``--json OUT`` writes it).
Run: ``.venv/bin/python bench/seed_batching.py [--epochs 100] [--seeds 16]``.
The harness code is only called, never modified: variants live in this file.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep torch.profiler's start/stop lines quiet
import torch  # noqa: E402
from torch.func import functional_call, grad_and_value, vmap  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.objectives.loading import load_objective  # noqa: E402
from harness.train import (  # noqa: E402
    Protocol,
    epoch_orders,
    predict,
    reduce_loss,
    stacked_init,
    train_members,
)
from harness.registry import get_suite  # noqa: E402
from suites.noisy_labels import protocol as nl  # noqa: E402

THREADS = 2
SECTIONS = ("compare", "flops", "profile", "variants", "sweep")


# ----------------------------------------------------------------------------- setup

class Workload:
    """The suite's digits data, one label row per seed, CE, the suite's protocol."""

    def __init__(self, labels: str, max_seeds: int, epochs: int):
        suite = get_suite("noisy-labels")
        self.protocol: Protocol = replace(nl.protocol_of(suite), epochs=epochs)
        self.data = nl.load_dataset("digits", None, False)
        variant = suite.variant(labels)
        self.labels_name = labels
        self.all_labels = torch.from_numpy(
            np.stack([nl.noisy_labels(self.data, variant, s) for s in range(max_seeds)]))
        self.x = torch.from_numpy(self.data.x_train)
        self.eval_x = torch.from_numpy(self.data.x_test)
        self.loss_fn = load_objective("ce").bind(suite.hook)

    def model(self) -> torch.nn.Module:
        return nl.model_for(self.data)

    def sizes(self) -> list[tuple[int, int]]:
        return [(m.in_features, m.out_features) for m in self.model()
                if isinstance(m, torch.nn.Linear)]

    def train(self, seeds: list[int], mode: str = "vmap", epochs: int | None = None):
        protocol = self.protocol if epochs is None else replace(self.protocol, epochs=epochs)
        return train_members(self.model(), self.loss_fn, self.x, self.all_labels[seeds],
                             seeds, protocol, eval_inputs=self.eval_x, mode=mode,
                             on_epoch=guard)


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return str(os.getloadavg())


def _cpu_jiffies() -> tuple[int, int]:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Others:
    """CPU share used by *other* processes while a block runs (0.5 = one core busy)."""

    share: float = float("nan")

    def __enter__(self):
        self.j0, self.o0, self.t0 = _cpu_jiffies(), _own_cpu(), time.perf_counter()
        return self

    def now(self) -> tuple[float, float]:
        """(others' share so far, seconds so far)."""
        (tot1, idle1), (tot0, idle0) = _cpu_jiffies(), self.j0
        busy = ((tot1 - tot0) - (idle1 - idle0)) / os.sysconf("SC_CLK_TCK")
        wall = time.perf_counter() - self.t0
        return max(0.0, busy - (_own_cpu() - self.o0)) / (wall * (os.cpu_count() or 1)), wall

    def __exit__(self, *exc) -> None:
        self.share, _ = self.now()


class Contaminated(Exception):
    """Raised between epochs when other processes made the running measurement useless."""


_GUARD: list[Others] = []  # the measurement in progress, if it may still be abandoned


def guard(*_) -> None:
    """Abandon the running measurement early if others have used the CPUs (saves minutes:
    an oversubscribed 2-thread run is 10-50x slower)."""
    if _GUARD:
        share, wall = _GUARD[0].now()
        if wall > 1.0 and share >= CLEAN:
            raise Contaminated


def wait_quiet(max_wait: float, threshold: float = 0.15) -> float:
    """Wait (up to max_wait s) until other processes use < threshold of the CPUs."""
    deadline = time.perf_counter() + max_wait
    while True:
        with Others() as o:
            time.sleep(0.5)
        if o.share < threshold or time.perf_counter() > deadline:
            return o.share


CLEAN = 0.15  # a measurement during which others used more CPU than this is retried
TRIES = 3


def clean_run(fn, quiet: float, tries: int | None = None):
    """(fn's result, seconds, others' CPU share, attempts): retried while others were busy."""
    tries = TRIES if tries is None else tries
    for attempt in range(1, tries + 1):
        wait_quiet(quiet)
        with Others() as o:
            if attempt < tries:
                _GUARD.append(o)
            t = time.perf_counter()
            try:
                out = fn()
            except Contaminated:
                print(f"    (abandoned a measurement: others used {o.now()[0]:.0%} of the "
                      f"CPUs; retrying)", flush=True)
                continue
            finally:
                _GUARD.clear()
            dt = time.perf_counter() - t
        if o.share < CLEAN:
            break
    return out, dt, o.share, attempt


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def spread(xs: list[float]) -> str:
    if len(xs) == 1:
        return f"{xs[0]:8.2f}s"
    return f"{med(xs):8.2f}s (min {min(xs):.2f}, max {max(xs):.2f}, n={len(xs)})"


def agree(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a == b).double().mean())


# ------------------------------------------------------------- 1-3: batched vs naive

_W: dict = {}


def _worker_init(labels: str, max_seeds: int, epochs: int, barrier) -> None:
    torch.set_num_threads(1)
    _W["work"] = Workload(labels, max_seeds, epochs)
    _W["barrier"] = barrier


def _worker_warm(_: int) -> int:
    _W["work"].train([0], epochs=1)  # first-call costs (lazy init, vmap tracing caches)
    _W["barrier"].wait(timeout=600)  # both workers must be up before the timed map
    return os.getpid()


def _worker_train(seed: int) -> tuple[int, torch.Tensor, float]:
    r = _W["work"].train([seed])
    return seed, r.eval_predictions[-1, 0], r.wall_time


def _worker_train_group(seeds: list[int]) -> tuple[list[int], torch.Tensor]:
    r = _W["work"].train(seeds)
    return seeds, r.eval_predictions[-1]


def run_processes(work: Workload, seeds: list[int], workers: int = 2) -> dict:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    t0 = time.perf_counter()
    with ctx.Pool(workers, initializer=_worker_init,
                  initargs=(work.labels_name, len(work.all_labels), work.protocol.epochs,
                            barrier)) as pool:
        pids = pool.map(_worker_warm, range(workers), chunksize=1)
        t1 = time.perf_counter()
        out = pool.map(_worker_train, seeds, chunksize=1)
        t2 = time.perf_counter()
        groups = pool.map(_worker_train_group, [seeds[i::workers] for i in range(workers)],
                          chunksize=1)
        t3 = time.perf_counter()
        pool.close()
        pool.join()  # reap the workers so their CPU time counts as ours
    out.sort(key=lambda r: r[0])
    grouped = torch.empty(len(seeds), out[0][1].shape[0], dtype=out[0][1].dtype)
    for chunk, preds in groups:
        grouped[[seeds.index(s) for s in chunk]] = preds
    return {"wall": t2 - t1, "batched_wall": t3 - t2, "batched_preds": grouped,
            "wall_with_startup": t2 - t0, "startup": t1 - t0,
            "workers": len(set(pids)),
            "preds": torch.stack([o[1] for o in out]),
            "sum_member_wall": sum(o[2] for o in out)}


def section_compare(work: Workload, seeds: list[int], repeats: int, quiet: float,
                    report: dict) -> None:
    print(f"\n== 1-3. {len(seeds)} seeds, {work.protocol.epochs} epochs, labels "
          f"{work.labels_name}: batched vs naive ==")
    torch.set_num_threads(THREADS)
    work.train(seeds[:2], epochs=1)  # warm-up: first-call costs are not the comparison
    times: dict[str, list[float]] = defaultdict(list)
    others: dict[str, list[float]] = defaultdict(list)
    preds: dict[str, torch.Tensor] = {}
    extra: dict = {}
    for r in range(repeats):
        print(f"  repeat {r + 1}/{repeats}  load {loadavg()}", flush=True)
        torch.set_num_threads(THREADS)
        res, dt, share, _ = clean_run(lambda: work.train(seeds), quiet)
        times["batched"].append(dt)
        others["batched"].append(share)
        preds["batched"] = res.eval_predictions[-1]
        extra["batched_train_preds"] = res.train_predictions
        extra["batched_mode"] = res.mode

        per, dt, share, _ = clean_run(lambda: [work.train([s]) for s in seeds], quiet)
        times["per_seed"].append(dt)
        others["per_seed"].append(share)
        preds["per_seed"] = torch.cat([p.eval_predictions[-1] for p in per])
        extra["per_seed_train_preds"] = torch.cat([p.train_predictions for p in per])

        res, dt, share, _ = clean_run(lambda: work.train(seeds, mode="loop"), quiet)
        times["loop_mode"].append(dt)
        others["loop_mode"].append(share)
        preds["loop_mode"] = res.eval_predictions[-1]

        proc, _, share, _ = clean_run(lambda: run_processes(work, seeds), quiet)
        others["processes"].append(share)
        torch.set_num_threads(THREADS)
        times["processes"].append(proc["wall"])
        times["processes_with_startup"].append(proc["wall_with_startup"])
        times["processes_batched"].append(proc["batched_wall"])
        preds["processes"] = proc["preds"]
        preds["processes_batched"] = proc["batched_preds"]
        extra["process_workers"] = proc["workers"]
        print("    " + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
        print("    other processes' CPU share during each: "
              + "  ".join(f"{k} {v[-1]:.0%}" for k, v in others.items()), flush=True)

    b = med(times["batched"])
    print(f"  batched (1 call, {len(seeds)} members, vmap, {THREADS} thr) "
          f"{spread(times['batched'])}")
    print(f"  per-seed loop ({len(seeds)} calls, M=1, {THREADS} thr)   "
          f"{spread(times['per_seed'])}   ratio {med(times['per_seed']) / b:5.2f}x")
    print(f"  trainer loop fallback (mode=loop)          {spread(times['loop_mode'])}   "
          f"ratio {med(times['loop_mode']) / b:5.2f}x")
    print(f"  processes ({extra['process_workers']} spawned workers x 1 thr, warm) "
          f"{spread(times['processes'])}   ratio {med(times['processes']) / b:5.2f}x")
    print(f"    ... including spawn + imports              "
          f"{spread(times['processes_with_startup'])}   "
          f"ratio {med(times['processes_with_startup']) / b:5.2f}x")
    print(f"  2 processes x 1 thr, each one batched call of {len(seeds) // 2} members "
          f"{spread(times['processes_batched'])}   "
          f"ratio {med(times['processes_batched']) / b:5.2f}x")
    print("  identical final test predictions vs batched (fraction of 797 x S):")
    agreement = {k: agree(preds["batched"], v) for k, v in preds.items() if k != "batched"}
    agreement["per_seed_train_preds"] = agree(extra["batched_train_preds"],
                                              extra["per_seed_train_preds"])
    for k, v in agreement.items():
        print(f"    {k:22s} {v:.5f}")
    report["compare"] = {
        "seeds": len(seeds), "epochs": work.protocol.epochs, "labels": work.labels_name,
        "times_s": dict(times), "median_s": {k: med(v) for k, v in times.items()},
        "ratio_vs_batched": {k: med(v) / b for k, v in times.items() if k != "batched"},
        "agreement_with_batched": agreement, "mode": extra["batched_mode"],
        "others_cpu_share": dict(others),
    }


# ------------------------------------------------------------------- 4a: FLOP/s

def time_op(fn, min_time: float = 0.3, repeats: int = 5) -> float:
    """Best-of-``repeats`` seconds per call, each estimate over >= min_time of calls.

    Best-of, not median: this is the kernel's attainable speed (the peak a training run
    is compared with), and a busy neighbour only ever makes a kernel slower."""
    for _ in range(3):
        fn()
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt >= min_time / 4:
            break
        n *= 2
    n = max(1, int(n * min_time / max(dt, 1e-9)))
    est = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        est.append((time.perf_counter() - t) / n)
    return min(est)


def step_matmuls(sizes: list[tuple[int, int]], members: int, batch: int) -> list[tuple]:
    """(name, bmm shape A, shape B) of one training step: forward, grad-input, grad-weight."""
    out = []
    for i, (fi, fo) in enumerate(sizes):
        out.append((f"fwd  L{i + 1}", (members, batch, fi), (members, fi, fo)))
        if i > 0:  # the input of the first layer needs no gradient
            out.append((f"dX   L{i + 1}", (members, batch, fo), (members, fo, fi)))
        out.append((f"dW   L{i + 1}", (members, fo, batch), (members, batch, fi)))
    return out


def analytic_flops(sizes, members, n_train, n_eval, epochs) -> dict:
    fwd = 2 * sum(fi * fo for fi, fo in sizes)  # per sample (multiply-adds x2)
    train = 3 * fwd * n_train * epochs * members  # backward ~ 2x forward
    evals = fwd * n_eval * epochs * members
    final = fwd * n_train * members
    return {"fwd_per_sample": fwd, "train": train, "eval": evals, "final_predict": final,
            "total": train + evals + final}


def section_flops(work: Workload, seeds: list[int], quiet: float, report: dict) -> None:
    print(f"\n== 4a. achieved FLOP/s vs measured matmul FLOP/s ({THREADS} threads) ==")
    torch.set_num_threads(THREADS)
    print(f"  load {loadavg()}")
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    t_mm, _, mm_share, _ = clean_run(lambda: time_op(lambda: a @ b), quiet)
    mm = 2 * 1024 ** 3 / t_mm
    M, B = len(seeds), work.protocol.batch_size
    sizes = work.sizes()
    print(f"  mm 1024x1024 @ 1024x1024 (best of 5)  {mm / 1e9:8.1f} GFLOP/s   "
          f"(others' CPU share {mm_share:.0%})")
    bmm_rows, step_mm_time, step_mm_flops = [], 0.0, 0
    for name, sa, sb in step_matmuls(sizes, M, B):
        x, y = torch.randn(*sa), torch.randn(*sb)
        t, _, _, _ = clean_run(lambda x=x, y=y: time_op(lambda: torch.bmm(x, y), min_time=0.15),
                               quiet)
        fl = 2 * sa[0] * sa[1] * sa[2] * sb[2]
        step_mm_time += t
        step_mm_flops += fl
        bmm_rows.append({"op": name, "a": sa, "b": sb, "us": t * 1e6, "gflops": fl / t / 1e9})
        print(f"  bmm {name} {str(list(sa)):>15} x {str(list(sb)):<15} {t * 1e6:7.1f} us "
              f"{fl / t / 1e9:7.1f} GFLOP/s")
    key = next(r for r in bmm_rows if r["a"] == (M, B, 256) and r["b"] == (M, 256, 256))
    bmm_peak = key["gflops"] * 1e9
    print(f"  all bmm of one step (M={M}, B={B}):    {step_mm_time * 1e3:7.2f} ms  "
          f"({step_mm_flops / step_mm_time / 1e9:.1f} GFLOP/s) = matmul floor per step")
    fl = analytic_flops(sizes, M, len(work.x), len(work.eval_x), work.protocol.epochs)
    out = {"mm1024_flops": mm, "bmm_16x64x256x256_flops": bmm_peak, "bmm": bmm_rows,
           "step_matmul_floor_s": step_mm_time, "analytic": fl}
    batched = report.get("compare", {}).get("median_s", {}).get("batched")
    if batched is None:  # section 1 did not run: time one batched run here
        torch.set_num_threads(THREADS)
        work.train(seeds[:2], epochs=1)
        _, batched, share, _ = clean_run(lambda: work.train(seeds), quiet)
        print(f"  batched run timed here (others' CPU share {share:.0%})")
    ach = fl["total"] / batched
    print(f"  analytic FLOPs ({M} members, {work.protocol.epochs} epochs): "
          f"{fl['total'] / 1e12:.3f} TFLOP (train {fl['train'] / 1e12:.3f}, "
          f"eval {fl['eval'] / 1e12:.3f}, final {fl['final_predict'] / 1e12:.4f})")
    print(f"  batched wall {batched:.2f}s -> achieved {ach / 1e9:.1f} GFLOP/s = "
          f"{ach / mm:.1%} of mm1024, {ach / bmm_peak:.1%} of the step's largest bmm")
    out.update(batched_wall_s=batched, achieved_flops=ach, fraction_of_mm1024=ach / mm,
               fraction_of_bmm=ach / bmm_peak)
    report["flops"] = out


# ------------------------------------------- 4b/5: a timed, modifiable copy of the step

class Laps:
    def __init__(self):
        self.acc: dict[str, float] = defaultdict(float)
        self.t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.acc[name] += now - self.t
        self.t = now


VARIANTS: dict[str, tuple[frozenset, str]] = {
    "baseline": (frozenset(), "copy of harness.train's step (checked identical)"),
    "nosync": (frozenset({"nosync"}),
               "no newly.any() x2 / alive.all() per step; freeze dead at epoch end"),
    "pregather": (frozenset({"pregather"}), "x[orders[epoch]] once per epoch, slice views"),
    "foreach_update": (frozenset({"foreach_update"}),
                       "clip+momentum+update as 3 torch._foreach_* calls"),
    "sgd_fused": (frozenset({"sgd_fused"}),
                  "grad.mul_(coef) then torch.optim.SGD(fused=True)"),
    "grad_and_value": (frozenset({"gv"}), "vmap(grad_and_value(loss)) instead of .backward()"),
    "bmm_model": (frozenset({"bmm_model"}), "hand-stacked baddbmm MLP, vmap only the loss"),
    "wt_layout": (frozenset({"wt_layout"}),
                  "weights stored [M,in,out] in memory (same shape): no AccumulateGrad copy"),
    "best_eager": (frozenset({"wt_layout", "gv", "pregather"}),
                   "wt_layout + grad_and_value + pregather"),
    "compile_update": (frozenset({"gv", "compile_update"}),
                       "grad_and_value eager, torch.compile only norms+clip+SGD"),
    "wt_cupdate": (frozenset({"wt_layout", "compile_update", "pregather"}),
                   "wt_layout + pregather, eager backward, compiled norms+clip+SGD"),
    "compile": (frozenset({"compile", "pregather"}),
                "torch.compile of grad_and_value+clip+SGD as one function"),
}


def _bmm_mlp_forward(params: dict, keys: list[str], xb: torch.Tensor) -> torch.Tensor:
    h = xb
    pairs = [(keys[i], keys[i + 1]) for i in range(0, len(keys), 2)]
    for i, (wk, bk) in enumerate(pairs):
        w, b = params[wk], params[bk]
        h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
        if i < len(pairs) - 1:
            h = torch.relu(h)
    return h


def _view(c: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return c.view(-1, *[1] * (t.dim() - 1))


def _norms_clip_sgd(leaves, bufs, grads, alive, lr, clip, momentum):
    """Norms, clipping and momentum SGD in one function (what the compile variants trace)."""
    grads = [torch.where(_view(alive, t), t, 0.0) for t in grads]
    norms = sum(torch.linalg.vector_norm(t.flatten(1), dim=1).square() for t in grads).sqrt()
    coef = (clip / (norms + 1e-6)).clamp(max=1.0) if clip is not None else \
        torch.ones_like(norms)
    for p, b, t in zip(leaves, bufs, grads, strict=True):
        b.mul_(momentum).addcmul_(t, _view(coef, t))
        p.sub_(b * lr)
    return norms


def train_copy(work: Workload, seeds: list[int], opts: frozenset = frozenset(),
               epochs: int | None = None, compiled: dict | None = None):
    """``harness.train.train_members`` (vmap path) restated with timers and switches.

    With no ``opts`` it must match the harness exactly (the profile section checks that
    and warns when the harness has moved on). Protocol: SGD momentum, no weight decay or
    Nesterov (the noisy-label suite's).
    """
    protocol = work.protocol if epochs is None else replace(work.protocol, epochs=epochs)
    assert protocol.weight_decay == 0 and not protocol.nesterov
    laps = Laps()
    model, loss_fn = work.model(), work.loss_fn
    x, labels, eval_x = work.x, work.all_labels[seeds], work.eval_x
    members, n = labels.shape
    params = stacked_init(model, seeds)
    keys = list(params)
    if "wt_layout" in opts:  # memory of W^T, shape of W: the vmapped dW then needs no copy
        params = {k: v.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
                  if v.dim() == 3 else v for k, v in params.items()}
    if opts & {"gv", "compile"}:
        params = {k: v.detach() for k, v in params.items()}
    leaves = list(params.values())
    bufs = [torch.zeros_like(v) for v in leaves]
    optimizer = None
    if "sgd_fused" in opts:
        optimizer = torch.optim.SGD(leaves, lr=protocol.lr, momentum=protocol.momentum,
                                    fused=True)
        bufs = []
    orders = epoch_orders(seeds, n, protocol.epochs)
    state = torch.full((members, n), float("nan"))
    steps_per_epoch = math.ceil(n / protocol.batch_size)
    total = steps_per_epoch * protocol.epochs
    alive = torch.ones(members, dtype=torch.bool)
    diverged: list[int | None] = [None] * members
    diverged_t = torch.full((members,), -1, dtype=torch.long)
    loss_curve = torch.zeros(members, protocol.epochs)
    grad_curve = torch.zeros(members, protocol.epochs)
    eval_preds = []
    clip, momentum = protocol.grad_clip, protocol.momentum

    def zero_members(dead: torch.Tensor) -> None:
        with torch.no_grad():
            momenta = bufs if optimizer is None else [
                b for t in leaves
                if (b := optimizer.state.get(t, {}).get("momentum_buffer")) is not None]
            for t in (*leaves, *momenta):
                t[dead] = 0.0

    def member_loss(p, xb, yb, index, state, progress):
        logits = functional_call(model, p, (xb,))
        return reduce_loss(loss_fn(logits, yb, progress=progress, index=index, state=state))

    in_dims = (0, 0, 0, 0, 0, None)
    if opts & {"gv", "compile"}:
        gv = vmap(grad_and_value(member_loss), in_dims=in_dims)
    elif "bmm_model" in opts:
        def loss_of_logits(logits, yb, index, state, progress):
            return reduce_loss(loss_fn(logits, yb, progress=progress, index=index, state=state))
        vloss = vmap(loss_of_logits, in_dims=(0, 0, 0, 0, None))
    else:
        step_fn = vmap(member_loss, in_dims=in_dims)

    compiled = {} if compiled is None else compiled
    if "compile" in opts and "step" not in compiled:
        def whole_step(plist, bufs, xb, yb, index, state, progress, lr, alive):
            g, losses = gv(dict(zip(keys, plist, strict=True)), xb, yb, index, state, progress)
            newly = ~torch.isfinite(losses) & alive
            norms = _norms_clip_sgd(plist, bufs, [g[k] for k in keys], alive & ~newly, lr,
                                    clip, momentum)
            return losses, norms, newly

        compiled["step"] = torch.compile(whole_step, dynamic=False)
    if "compile_update" in opts and "update" not in compiled:
        compiled["update"] = torch.compile(_norms_clip_sgd, dynamic=False)

    laps("init")
    step = 0
    for epoch in range(protocol.epochs):
        loss_sum = torch.zeros(members)
        grad_sum = torch.zeros(members)
        if "pregather" in opts:
            ep_order = orders[epoch]
            xe, ye = x[ep_order], torch.gather(labels, 1, ep_order)
        for j in range(steps_per_epoch):
            sl = slice(j * protocol.batch_size, (j + 1) * protocol.batch_size)
            index = orders[epoch, :, sl]
            if "pregather" in opts:
                xb, yb = xe[:, sl], ye[:, sl]
            else:
                xb, yb = x[index], torch.gather(labels, 1, index)
            progress = step / total
            lr = protocol.lr_at(step, total)
            laps("gather batch")
            if "compile" in opts:
                losses, norms, newly = compiled["step"](
                    leaves, bufs, xb, yb, index, state, torch.tensor(progress),
                    torch.tensor(lr), alive)
                laps("compiled step")
                if newly.any():
                    for m in newly.nonzero().flatten().tolist():
                        diverged[m] = step
                    alive &= ~newly
                    zero_members(newly)
                laps("isfinite/any checks")
            else:
                if "gv" in opts:
                    g, losses = gv(params, xb, yb, index, state, progress)
                    grads = [g[k] for k in keys]
                    laps("fwd+bwd (grad_and_value)")
                elif "bmm_model" in opts:
                    logits = _bmm_mlp_forward(params, keys, xb)
                    losses = vloss(logits, yb, index, state, progress)
                    laps("vmapped forward+loss")
                else:
                    losses = step_fn(params, xb, yb, index, state, progress)
                    laps("vmapped forward+loss")
                newly = ~torch.isfinite(losses) & alive
                if "nosync" in opts:
                    diverged_t = torch.where(newly, step, diverged_t)
                    alive &= ~newly
                elif newly.any():
                    for m in newly.nonzero().flatten().tolist():
                        diverged[m] = step
                    alive &= ~newly
                laps("isfinite/any checks")
                if "gv" not in opts:
                    for t in leaves:
                        t.grad = None
                    laps("grad = None")
                    torch.where(alive, losses, torch.zeros_like(losses)).sum().backward()
                    grads = [t.grad for t in leaves]
                    laps("backward")
                if "nosync" not in opts and newly.any():
                    zero_members(newly)  # after backward, as the harness does
                laps("isfinite/any checks")
                with torch.no_grad():
                    if "compile_update" in opts:
                        norms = compiled["update"](leaves, bufs, grads, alive, torch.tensor(lr),
                                                   clip, momentum)
                        laps("compiled norms+clip+SGD")
                    else:
                        if "nosync" not in opts and not bool(alive.all()):
                            for t in grads:
                                t[~alive] = 0.0
                        if "wt_layout" in opts:  # flatten(1) would copy a strided grad
                            norms = sum(torch.linalg.vector_norm(
                                t, dim=tuple(range(1, t.dim()))).square() for t in grads).sqrt()
                        else:
                            norms = sum(torch.linalg.vector_norm(t.flatten(1), dim=1).square()
                                        for t in grads).sqrt()
                        coef = (clip / (norms + 1e-6)).clamp(max=1.0) if clip is not None \
                            else torch.ones_like(norms)
                        if "nosync" in opts:  # dead members: coef 0, their NaNs stay theirs
                            norms = torch.where(alive, norms, 0.0)
                            coef = torch.where(alive, coef, 0.0)
                        laps("grad norms + clip coef")
                        cviews = [_view(coef, t) for t in grads]
                        if "sgd_fused" in opts:
                            for t, g_, c in zip(leaves, grads, cviews, strict=True):
                                t.grad = g_.mul_(c)
                            for group in optimizer.param_groups:
                                group["lr"] = lr
                            optimizer.step()
                        elif "foreach_update" in opts:
                            torch._foreach_mul_(bufs, momentum)
                            torch._foreach_addcmul_(bufs, grads, cviews)
                            torch._foreach_add_(leaves, bufs, alpha=-lr)
                        else:  # harness _sgd_step
                            for t, b, g_, c in zip(leaves, bufs, grads, cviews, strict=True):
                                b.mul_(momentum).addcmul_(g_, c)
                                t.sub_(b, alpha=lr)
                        laps("SGD update (clip folded in)")
            loss_sum += losses.detach().nan_to_num(0.0) * len(yb[0])
            grad_sum += norms
            laps("curves (loss/grad sums)")
            step += 1
        if "nosync" in opts and not bool(alive.all()):  # one host sync per epoch
            zero_members(~alive)
        loss_curve[:, epoch] = loss_sum / n
        grad_curve[:, epoch] = grad_sum / steps_per_epoch
        laps("curves (loss/grad sums)")
        eval_preds.append(predict(model, params, eval_x))
        laps("per-epoch predict")
        guard()
        laps.t = time.perf_counter()  # the guard's check is not part of the step
    train_preds = predict(model, params, x)
    laps("final predict")
    if "nosync" in opts:
        diverged = [None if s < 0 else int(s) for s in diverged_t.tolist()]
    return {"eval_predictions": torch.stack(eval_preds), "train_predictions": train_preds,
            "loss_curve": loss_curve, "grad_curve": grad_curve, "diverged": diverged,
            "laps": dict(laps.acc), "steps": step}


def section_profile(work: Workload, seeds: list[int], epochs: int, repeats: int,
                    quiet: float, report: dict) -> None:
    print(f"\n== 4b. where the batched step spends its time ({len(seeds)} members, "
          f"{epochs} epochs, timed copy of the step) ==")
    torch.set_num_threads(THREADS)
    print(f"  load {loadavg()}")
    real = work.train(seeds, epochs=epochs)
    train_copy(work, seeds, epochs=1)  # warm-up
    runs, shares = [], []
    for _ in range(repeats):
        out, _, share, _ = clean_run(lambda: train_copy(work, seeds, epochs=epochs), quiet)
        runs.append(out)
        shares.append(share)
    print("  other processes' CPU share during the runs: "
          + " ".join(f"{s:.0%}" for s in shares))
    same = agree(real.eval_predictions, runs[0]["eval_predictions"])
    same_loss = bool(torch.equal(real.loss_curve, runs[0]["loss_curve"])
                     and torch.equal(real.grad_norm_curve, runs[0]["grad_curve"]))
    print(f"  copy vs harness train_members: identical eval predictions {same:.5f}, "
          f"identical loss and grad-norm curves: {same_loss}")
    if not same_loss:
        print("  WARNING: harness/train.py has changed since this copy was written; the "
              "breakdown and the variants describe the copy, not the harness")
    steps = runs[0]["steps"]
    names = list(runs[0]["laps"])
    per = {k: med([r["laps"].get(k, 0.0) for r in runs]) for k in names}
    wall = sum(per.values())
    step_keys = [k for k in names if k not in ("init", "per-epoch predict", "final predict")]
    step_total = sum(per[k] for k in step_keys)
    print(f"  {'phase':28s} {'ms/step':>8s} {'% step':>7s} {'total s':>8s} {'% wall':>7s}")
    for k in names:
        unit = f"{per[k] / steps * 1e3:8.3f} {per[k] / step_total:7.1%}" if k in step_keys \
            else " " * 16
        print(f"  {k:28s} {unit} {per[k]:8.3f} {per[k] / wall:7.1%}")
    print(f"  {'= training step':28s} {step_total / steps * 1e3:8.3f} {1:7.0%} "
          f"{step_total:8.3f} {step_total / wall:7.1%}"
          f"   (per-epoch predict: {per['per-epoch predict'] / epochs * 1e3:.2f} ms/epoch)")
    fl = report.get("flops", {})
    if "step_matmul_floor_s" in fl:
        floor = fl["step_matmul_floor_s"]
        print(f"  matmul floor (all bmm of a step at measured speed) {floor * 1e3:.3f} ms = "
              f"{floor / (step_total / steps):.0%} of the step; the rest is elementwise "
              f"passes over stacked parameters, autograd/functorch and Python dispatch")
    # operator-level view from torch.profiler, one epoch
    from torch.profiler import ProfilerActivity, profile
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # kineto prints start/stop lines on fd 2
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            r = train_copy(work, seeds, epochs=1)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    events = prof.key_averages()
    n_ops = sum(e.count for e in events if e.key.startswith("aten::"))
    top = sorted((e for e in events if e.key.startswith("aten::")),
                 key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    prof_total = sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::"))
    print(f"  torch.profiler, 1 epoch: {n_ops / r['steps']:.0f} aten ops per step "
          f"(incl. nested), top self-CPU ops:")
    ops = []
    for e in top:
        share = e.self_cpu_time_total / prof_total
        print(f"    {e.key:34s} calls/step {e.count / r['steps']:6.1f}  "
              f"self {e.self_cpu_time_total / 1e3 / r['steps']:7.3f} ms/step ({share:.0%})")
        ops.append({"op": e.key, "calls_per_step": e.count / r["steps"],
                    "self_ms_per_step": e.self_cpu_time_total / 1e3 / r["steps"]})
    report["profile"] = {"epochs": epochs, "steps": steps, "phase_s": per,
                         "phase_ms_per_step": {k: v / steps * 1e3 for k, v in per.items()},
                         "step_ms": step_total / steps * 1e3, "copy_identical": same,
                         "aten_ops_per_step": n_ops / r["steps"], "top_ops": ops,
                         "others_cpu_share": shares}


def section_variants(work: Workload, seeds: list[int], epochs: int, repeats: int,
                     names: list[str], quiet: float, report: dict) -> None:
    print(f"\n== 5. step variants ({len(seeds)} members, {epochs} epochs, median of {repeats}, "
          f"interleaved) ==")
    torch.set_num_threads(THREADS)
    print(f"  load {loadavg()}")
    compiled: dict = {}
    results: dict[str, list] = defaultdict(list)
    compile_s = {}
    for name in [n for n in names if n.startswith("compile")]:
        t = time.perf_counter()
        try:
            train_copy(work, seeds, VARIANTS[name][0], epochs=1, compiled=compiled)
            compile_s[name] = time.perf_counter() - t
            print(f"  {name}: first epoch incl. compilation {compile_s[name]:.1f}s "
                  f"(less when the inductor cache in /tmp is warm)")
        except Exception as exc:  # report, don't die: it is a feasibility probe
            print(f"  {name}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
            names = [n for n in names if n != name]
    for name in names:  # warm-up (first-call costs; compile is already compiled)
        train_copy(work, seeds, VARIANTS[name][0], epochs=1, compiled=compiled)
    shares = []

    for _ in range(repeats):  # interleaved; each run is retried on its own when disturbed
        for name in names:
            out, wall, share, _ = clean_run(
                lambda name=name: train_copy(work, seeds, VARIANTS[name][0], epochs=epochs,
                                             compiled=compiled), quiet)
            out["wall"], out["others"] = wall, share
            results[name].append(out)
            shares.append(share)
    print(f"  other processes' CPU share during the runs: median {med(shares):.0%}, "
          f"max {max(shares):.0%}")
    base = results["baseline"]
    base_step = med([_step_s(o) for o in base]) / base[0]["steps"]
    base_wall = med([o["wall"] for o in base])
    print(f"  {'variant':15s} {'step ms':>8s} {'speedup':>8s} {'wall s':>7s} {'speedup':>8s} "
          f"{'same preds':>10s}  what")
    rows = {}
    for name in names:
        outs = results[name]
        step = med([_step_s(o) for o in outs]) / outs[0]["steps"]
        wall = med([o["wall"] for o in outs])
        same = agree(base[0]["eval_predictions"][-1], outs[0]["eval_predictions"][-1])
        print(f"  {name:15s} {step * 1e3:8.3f} {base_step / step:7.2f}x {wall:7.2f} "
              f"{base_wall / wall:7.2f}x {same:10.4f}  {VARIANTS[name][1]}")
        rows[name] = {"step_ms": step * 1e3, "step_speedup": base_step / step, "wall_s": wall,
                      "wall_speedup": base_wall / wall, "agreement_with_baseline": same,
                      "step_ms_all": [_step_s(o) / o["steps"] * 1e3 for o in outs]}
    report["variants"] = {"epochs": epochs, "rows": rows, "compile_first_epoch_s": compile_s,
                          "others_cpu_share": shares}


def _step_s(out: dict) -> float:
    return sum(v for k, v in out["laps"].items()
               if k not in ("init", "per-epoch predict", "final predict"))


# --------------------------------------------------------------------------- 6: sweep

def section_sweep(work: Workload, sizes: list[int], epochs: int, repeats: int,
                  quiet: float, report: dict) -> None:
    print(f"\n== 6. batching sweep ({epochs} epochs, harness train_members, vmap, "
          f"{THREADS} threads, median of {repeats}) ==")
    torch.set_num_threads(THREADS)
    print(f"  load {loadavg()}")
    work.train([0], epochs=1)
    times: dict[int, list[float]] = defaultdict(list)
    shares = []

    for _ in range(repeats):
        for s in sizes:
            _, dt, share, _ = clean_run(lambda s=s: work.train(list(range(s)), epochs=epochs),
                                        quiet)
            times[s].append(dt)
            shares.append(share)
    print(f"  other processes' CPU share during the runs: median {med(shares):.0%}, "
          f"max {max(shares):.0%}")
    steps = epochs * math.ceil(len(work.x) / work.protocol.batch_size)
    base = med(times[sizes[0]]) / sizes[0]
    ref = f"vs S={sizes[0]}"
    print(f"  {'S':>4s} {'wall s':>8s} {'ms/step':>8s} {'ms/member-epoch':>16s} {ref:>8s}")
    rows = {}
    for s in sizes:
        w = med(times[s])
        print(f"  {s:4d} {w:8.2f} {w / steps * 1e3:8.2f} {w / s / epochs * 1e3:16.2f} "
              f"{base / (w / s):7.2f}x")
        rows[s] = {"wall_s": w, "ms_per_step": w / steps * 1e3,
                   "ms_per_member_epoch": w / s / epochs * 1e3, "all_s": times[s]}
    report["sweep"] = {"epochs": epochs, "rows": rows, "others_cpu_share": shares}


# ---------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> dict:
    global TRIES
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=100, help="epochs for sections 1-4 (100)")
    ap.add_argument("--seeds", type=int, default=16, help="members / seeds (16)")
    ap.add_argument("--labels", default="sym-0.4",
                    help="suite variant whose labels are used: sym-0.4, clean, ...")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per measurement; medians")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma list of sections: {','.join(SECTIONS)}")
    ap.add_argument("--profile-epochs", type=int, default=20)
    ap.add_argument("--variant", default="all",
                    help="comma list of step variants to time (baseline always), or 'all': "
                         + ",".join(VARIANTS))
    ap.add_argument("--no-compile", action="store_true",
                    help="skip the torch.compile variants")
    ap.add_argument("--variant-epochs", type=int, default=20)
    ap.add_argument("--sweep", default="1,4,16,35,64")
    ap.add_argument("--sweep-epochs", type=int, default=10)
    ap.add_argument("--quiet-wait", type=float, default=120.0, metavar="S",
                    help="before each measurement wait up to S s for other processes to "
                         "use < 15%% of the CPUs (0: don't wait)")
    ap.add_argument("--tries", type=int, default=TRIES,
                    help=f"retry a measurement during which others used > {CLEAN:.0%}% of "
                         f"the CPUs, up to this many times ({TRIES})")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args(argv)

    TRIES = max(1, args.tries)
    torch.set_num_threads(THREADS)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    sweep = [int(s) for s in args.sweep.split(",")] if "sweep" in sections else []
    max_seeds = max([args.seeds, *sweep])
    work = Workload(args.labels, max_seeds, args.epochs)
    seeds = list(range(args.seeds))
    report: dict = {"argv": sys.argv[1:], "torch": torch.__version__,
                    "python": platform.python_version(), "threads": THREADS,
                    "cpu_count": os.cpu_count(), "load_start": loadavg(),
                    "model": str(work.sizes()), "protocol": work.protocol.__dict__}
    print(f"seed batching bench: torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"{THREADS} threads, model {work.sizes()}, labels {args.labels}, "
          f"{args.seeds} seeds, {args.epochs} epochs\nload at start {loadavg()} "
          f"(other processes on the machine distort every number below)")
    t0 = time.perf_counter()
    if "compare" in sections:
        section_compare(work, seeds, args.repeats, args.quiet_wait, report)
    if "flops" in sections:
        section_flops(work, seeds, args.quiet_wait, report)
    if "profile" in sections:
        section_profile(work, seeds, args.profile_epochs, args.repeats, args.quiet_wait,
                        report)
    if "variants" in sections:
        names = list(VARIANTS) if args.variant == "all" else \
            ["baseline"] + [v for v in args.variant.split(",") if v != "baseline"]
        if args.no_compile:
            names = [n for n in names if not n.startswith("compile")]
        unknown = [n for n in names if n not in VARIANTS]
        if unknown:
            ap.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
        section_variants(work, seeds, args.variant_epochs, args.repeats, names,
                         args.quiet_wait, report)
    if "sweep" in sections:
        section_sweep(work, sweep, args.sweep_epochs, args.repeats, args.quiet_wait, report)
    report["load_end"] = loadavg()
    report["bench_wall_s"] = time.perf_counter() - t0
    print(f"\nload at end {loadavg()}, bench took {report['bench_wall_s']:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=_jsonable))
        print(f"wrote {args.json}")
    return report


def _jsonable(o):
    if isinstance(o, torch.Tensor):
        return o.tolist()
    if isinstance(o, tuple | set | frozenset):
        return list(o)
    return str(o)


if __name__ == "__main__":
    main()
