"""Bounds benchmark: what do IBP, CROWN-IBP and full CROWN cost, batched over seeds, and how tight?

Workload: the certified suite's MLP 64-128-128-10 on digits in [0, 1] (and a small CNN for
8×8 inputs: conv16-conv32/s2-FC100; its full CROWN is timed on 20 inputs and scaled), ε = 0.1,
5 stacked seeds (parameters stacked on dim 0, as ``harness.train`` trains them).

1. speed      per method: ms per 1k inputs per seed for one seed alone, for a per-seed loop over
              the 5 seeds, and for ``vmap`` over the 5 stacked seeds (shared inputs); the ratio
              loop / vmap. Also a training-shaped step (value and gradient of the robust CE on a
              batch of 64, per seed) for IBP and CROWN-IBP; and full CROWN with the intermediate
              bounds' ReLU and Linear substituted at once against the two-step substitution.
2. tightness  mean lower bound of the margins z_y − z_j (j ≠ y) on the 297 test digits, the mean
              gap to the smallest margin a 20-step PGD finds (≥ 0; smaller is tighter) and the
              verified fraction, on a randomly initialised, a CE-trained and an IBP-trained MLP.

Nothing is asserted. ``.venv/bin/python bench/bounds.py [--threads 2] [--only speed]
[--json OUT]`` (~3 min on a quiet 2-core machine). Timings are best-of-5 rounds in which one
seed, the loop and vmap alternate, after waiting (``--quiet-wait``) for a quiet machine; each
row records the CPU share other processes used meanwhile (a busy neighbour makes 2-thread
torch runs many times slower; see bench/README.md).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import grad, vmap

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.models.mlp import mlp  # noqa: E402
from suites.certified import bounds  # noqa: E402

EPS = 0.1
SEEDS = 5
TRAIN_EPOCHS = [10]  # of the models whose bounds' tightness is measured (--smoke: 1)
METHODS = {
    "ibp": lambda m, p, x, y: bounds.ibp_margins(m, p, x, EPS, y),
    "crown-ibp": lambda m, p, x, y: bounds.crown_margins(m, p, x, EPS, y, intermediate="ibp"),
    "crown": lambda m, p, x, y: bounds.crown_margins(m, p, x, EPS, y, intermediate="crown"),
}


# ----------------------------------------------------------------------------- measuring

def _cpu_jiffies() -> tuple[int, int]:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


class Others:
    """CPU share used by *other* processes while a block runs (0.5 = one of 2 cores busy)."""

    share: float = float("nan")

    def __enter__(self):
        self.j0, self.o0, self.t0 = _cpu_jiffies(), _own_cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        (tot1, idle1), (tot0, idle0) = _cpu_jiffies(), self.j0
        busy = ((tot1 - tot0) - (idle1 - idle0)) / os.sysconf("SC_CLK_TCK")
        wall = time.perf_counter() - self.t0
        self.share = max(0.0, busy - (_own_cpu() - self.o0)) / (wall * (os.cpu_count() or 1))


def wait_quiet(max_wait: float, threshold: float = 0.15) -> None:
    """Wait up to ``max_wait`` s until other processes use < ``threshold`` of the CPUs."""
    deadline = time.perf_counter() + max_wait
    while time.perf_counter() < deadline:
        with Others() as o:
            time.sleep(0.5)
        if o.share < threshold:
            return


ROUNDS = {"min_time": 0.2, "rounds": 5}  # --smoke: one short round, no calibration calls
SPEED_INPUTS = [1000]  # inputs the bounds alone are timed on (--smoke: 64)


def timed(fns: dict, quiet: float, min_time: float | None = None,
          rounds: int | None = None) -> tuple[dict, float]:
    """Best-of-``rounds`` seconds per call of each fn, rounds interleaved so that a busy
    neighbour hits all of them alike; and the CPU share other processes used meanwhile."""
    min_time = ROUNDS["min_time"] if min_time is None else min_time
    rounds = ROUNDS["rounds"] if rounds is None else rounds
    counts = dict.fromkeys(fns, 1)  # min_time 0 (--smoke): one call each, no calibration
    if min_time > 0:
        for name, fn in fns.items():
            fn()
            start = time.perf_counter()
            fn()
            counts[name] = max(1, int(min_time / max(time.perf_counter() - start, 1e-6)))
    wait_quiet(quiet)
    best = dict.fromkeys(fns, float("inf"))
    with Others() as others:
        for _ in range(rounds):
            for name, fn in fns.items():
                t = time.perf_counter()
                for _ in range(counts[name]):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - t) / counts[name])
    return best, others.share


# ----------------------------------------------------------------------------- workload

def digits() -> tuple[torch.Tensor, ...]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target)
    return x[:1500], y[:1500], x[1500:], y[1500:]


def small_cnn() -> nn.Sequential:
    """conv16 - conv32 stride 2 - FC100 - FC10 on [B, 1, 8, 8] digits."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 100), nn.ReLU(), nn.Linear(100, 10))


def stacked(model: nn.Module, seeds: int) -> dict[str, torch.Tensor]:
    per = []
    for s in range(seeds):
        torch.manual_seed(s)
        m = copy.deepcopy(model)
        for layer in m.modules():
            if hasattr(layer, "reset_parameters"):
                layer.reset_parameters()
        per.append({k: v.detach() for k, v in m.named_parameters()})
    return {k: torch.stack([p[k] for p in per]) for k in per[0]}


def robust_ce(method):
    def loss(model, p, x, y):
        return F.cross_entropy(bounds.worst_case_logits(method(model, p, x, y)), y)
    return loss


def speed(name: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_x, batch_y,
          crown_inputs: int, quiet: float) -> list[dict]:
    """Bounds alone ([1k] inputs, no grad) and a training-shaped value+grad on [64] per seed."""
    params = stacked(model, SEEDS)
    one = [{k: v[m] for k, v in params.items()} for m in range(SEEDS)]
    rows = []
    for method, fn in METHODS.items():
        xs, ys = (x, y) if method != "crown" else (x[:crown_inputs], y[:crown_inputs])
        batched = vmap(lambda p, f=fn, a=xs, b=ys: f(model, p, a, b))
        with torch.no_grad():
            t, others = timed({
                "one": lambda f=fn, a=xs, b=ys: f(model, one[0], a, b),
                "loop": lambda f=fn, a=xs, b=ys: [f(model, p, a, b) for p in one],
                "vmap": lambda g=batched: g(params)}, quiet)
        rows.append(_row(name, method, len(xs), t, others))
    for method in ("ibp", "crown-ibp"):
        loss = robust_ce(METHODS[method])
        g = grad(lambda p, xb, yb, f=loss: f(model, p, xb, yb))
        batched = vmap(g)
        t, others = timed({
            "one": lambda g=g: g(one[0], batch_x[0], batch_y[0]),
            "loop": lambda g=g: [g(p, batch_x[m], batch_y[m]) for m, p in enumerate(one)],
            "vmap": lambda g=batched: g(params, batch_x, batch_y)}, quiet)
        rows.append(_row(name, f"{method}+grad", batch_x.shape[1], t, others))
    return rows


def fusion(name: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, quiet: float) -> dict:
    """Full CROWN over the stacked seeds with the intermediate bounds' ReLU and Linear
    substituted at once (``bounds.FUSE_RELU_LINEAR``, the default) against the two-step
    substitution that builds [B, 2n, n] coefficients: the same bounds, timed in one run."""
    params = stacked(model, SEEDS)
    batched = vmap(lambda p: METHODS["crown"](model, p, x, y))

    def run(fused: bool):
        bounds.FUSE_RELU_LINEAR = fused
        try:
            return batched(params)
        finally:
            bounds.FUSE_RELU_LINEAR = True

    with torch.no_grad():
        gap = float((run(True) - run(False)).abs().max())
        t, others = timed({"fused": lambda: run(True), "two-step": lambda: run(False)}, quiet)
    return {"model": name, "batch": len(x), "fused_ms": t["fused"] * 1e3,
            "two_step_ms": t["two-step"] * 1e3, "two_step_over_fused": t["two-step"] / t["fused"],
            "max_abs_difference": gap, "others_cpu": others}


def _row(model: str, method: str, inputs: int, t: dict, others: float) -> dict:
    per_1k = 1e6 / inputs  # seconds per call -> ms per 1k inputs
    return {"model": model, "method": method, "batch": inputs, "one_seed_ms": t["one"] * per_1k,
            "loop_ms": t["loop"] * per_1k / SEEDS, "vmap_ms": t["vmap"] * per_1k / SEEDS,
            "loop_over_vmap": t["loop"] / t["vmap"], "others_cpu": others}


# ----------------------------------------------------------------------------- tightness

def train(model: nn.Module, x, y, epochs: int, ibp_eps: float = 0.0) -> nn.Module:
    """A few epochs of Adam on CE, or on ½CE + ½ robust IBP CE with ε ramped 0 → ibp_eps."""
    model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps, step = epochs * ((len(x) + 63) // 64), 0
    for _ in range(epochs):
        for idx in torch.randperm(len(x)).split(64):
            loss = F.cross_entropy(model(x[idx]), y[idx])
            if ibp_eps:
                eps = ibp_eps * min(1.0, 2 * step / steps)
                p = dict(model.named_parameters())
                m = bounds.ibp_margins(model, p, x[idx], eps, y[idx])
                loss = 0.5 * loss + 0.5 * F.cross_entropy(bounds.worst_case_logits(m), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
    return model


def pgd_margins(model, x, y, eps, steps: int = 20) -> torch.Tensor:
    """[B, K] smallest z_y − z_j found per (input, j) by sign-gradient PGD from the centre."""
    k = model(x[:1]).shape[-1]
    lo, hi = (t.repeat_interleave(k, 0) for t in bounds.input_box(x, eps))
    yr, jr = y.repeat_interleave(k), torch.arange(k).repeat(len(x))
    xa, best = (lo + hi) / 2, torch.full((len(x) * k,), float("inf"))
    for t in range(steps + 1):
        xa = xa.detach().requires_grad_()
        z = model(xa)
        m = z.gather(1, yr[:, None])[:, 0] - z.gather(1, jr[:, None])[:, 0]
        best = torch.minimum(best, m.detach())
        (g,) = torch.autograd.grad(m.sum(), xa)
        xa = torch.minimum(torch.maximum(xa - (hi - lo) * (0.25 if t < steps // 2 else 0.05)
                                         * g.sign(), lo), hi)
    return best.reshape(len(x), k)


def tightness(name: str, model: nn.Module, x, y, eps: float) -> list[dict]:
    p = {k: v.detach() for k, v in model.named_parameters()}
    attacked = pgd_margins(model, x, y, eps)
    others = torch.ones_like(attacked, dtype=torch.bool).scatter(1, y[:, None], False)
    rows = []
    with torch.no_grad():
        for method in METHODS:
            inter = {"ibp": None, "crown-ibp": "ibp", "crown": "crown"}[method]
            m = (bounds.ibp_margins(model, p, x, eps, y) if inter is None else
                 bounds.crown_margins(model, p, x, eps, y, intermediate=inter))
            rows.append({"model": name, "eps": eps, "method": method,
                         "mean_bound": float(m[others].mean()),
                         "mean_gap_to_pgd": float((attacked - m)[others].mean()),
                         "verified": float(bounds.verified(m).double().mean())})
    rows.append({"model": name, "eps": eps, "method": "pgd (upper ref.)",
                 "mean_bound": float(attacked[others].mean()), "mean_gap_to_pgd": 0.0,
                 "verified": float((attacked > 0).sum(1).eq(attacked.shape[1] - 1)
                                   .double().mean())})
    return rows


# ----------------------------------------------------------------------------- report

def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-cnn", action="store_true", help="skip the CNN speed rows")
    ap.add_argument("--only", choices=["speed", "tightness"], help="run one section")
    ap.add_argument("--quiet-wait", type=float, default=20.0, metavar="S",
                    help="before each timing, wait up to S s for other processes to go quiet")
    ap.add_argument("--json", metavar="OUT", help="write the report as JSON")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny run (MLP only, one short round on 64 inputs, one training "
                         "epoch)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.no_cnn, args.quiet_wait = True, 0.0
        ROUNDS.update(min_time=0.0, rounds=1)
        TRAIN_EPOCHS[0], SPEED_INPUTS[0] = 1, 64
    torch.set_num_threads(args.threads)
    x_tr, y_tr, x_te, y_te = digits()
    gen = torch.Generator().manual_seed(0)
    idx = torch.stack([torch.randperm(1500, generator=gen)[:64] for _ in range(SEEDS)])
    report = {"threads": args.threads, "eps": EPS, "seeds": SEEDS, "torch": torch.__version__}

    if args.only != "tightness":
        speed_section(args, report, x_tr, y_tr, idx)
    if args.only != "speed":
        tightness_section(report, x_tr, y_tr, x_te, y_te)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return report


def speed_section(args, report: dict, x_tr, y_tr, idx) -> None:
    n = SPEED_INPUTS[0]
    x1k, y1k = x_tr[:n], y_tr[:n]
    the_mlp = mlp((64, 128, 128, 10))
    speed_rows = speed("mlp 64-128-128-10", the_mlp, x1k, y1k, x_tr[idx], y_tr[idx],
                       crown_inputs=n, quiet=args.quiet_wait)
    if not args.no_cnn:
        img = lambda t: t.reshape(*t.shape[:-1], 1, 8, 8)  # noqa: E731
        speed_rows += speed("cnn c16-c32s2-fc100", small_cnn(), img(x1k), y1k,
                            img(x_tr[idx]), y_tr[idx], crown_inputs=20, quiet=args.quiet_wait)
    report["speed"] = speed_rows
    report["crown_fusion"] = fused = [fusion("mlp 64-128-128-10", the_mlp, x1k, y1k,
                                             args.quiet_wait)]
    print(f"speed: ε={EPS}, {SEEDS} stacked seeds, {args.threads} threads, ms per 1k inputs "
          "per seed (crown on the CNN timed on 20 inputs and scaled)")
    print(f"{'model':22s} {'method':15s} {'batch':>5s} {'1 seed':>9s} {'loop':>9s} "
          f"{'vmap':>9s} {'loop/vmap':>9s} {'others':>6s}")
    for r in speed_rows:
        print(f"{r['model']:22s} {r['method']:15s} {r['batch']:5d} {r['one_seed_ms']:9.2f} "
              f"{r['loop_ms']:9.2f} {r['vmap_ms']:9.2f} {r['loop_over_vmap']:9.2f} "
              f"{r['others_cpu']:6.0%}")
    for r in fused:
        print(f"full CROWN, {SEEDS} stacked seeds × {r['batch']} inputs ({r['model']}): "
              f"fused ReLU+Linear {r['fused_ms']:.0f} ms, two-step {r['two_step_ms']:.0f} ms: "
              f"{r['two_step_over_fused']:.2f}× (bounds differ by ≤ {r['max_abs_difference']:.1e}; "
              f"others {r['others_cpu']:.0%})")


def tightness_section(report: dict, x_tr, y_tr, x_te, y_te) -> None:
    torch.manual_seed(0)
    models = {"random init": mlp((64, 128, 128, 10))}
    t = time.perf_counter()
    epochs = TRAIN_EPOCHS[0]
    models[f"ce, {epochs} epochs"] = train(models["random init"], x_tr, y_tr, epochs)
    models[f"ibp ε=.1, {epochs} epochs"] = train(models["random init"], x_tr, y_tr, epochs,
                                                  ibp_eps=0.11)
    report["train_s"] = time.perf_counter() - t
    tight_rows = [r for name, m in models.items() for eps in (0.05, 0.1)
                  for r in tightness(name, m, x_te, y_te, eps)]
    report["tightness"] = tight_rows
    print(f"\ntightness on {len(x_te)} test digits: margins z_y − z_j, j ≠ y")
    print(f"{'model':22s} {'eps':>5s} {'method':16s} {'mean bound':>10s} {'gap to pgd':>10s} "
          f"{'verified':>8s}")
    for r in tight_rows:
        print(f"{r['model']:22s} {r['eps']:5.2f} {r['method']:16s} {r['mean_bound']:10.3f} "
              f"{r['mean_gap_to_pgd']:10.3f} {r['verified']:8.1%}")


if __name__ == "__main__":
    main()
