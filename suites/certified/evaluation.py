"""The trusted evaluation of certified training: clean, PGD, IBP- and CROWN-verified
accuracy of the returned weights, bound gaps, verified accuracy over an ε grid, and a
soundness check of every evaluation (a violation is a harness bug, never a result)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from suites.certified import bounds
from suites.certified.attack import PGDConfig, pgd_evaluate
from suites.certified.data import Box
from suites.certified.models import Net, recalibrate

SOUNDNESS_ATOL = 1e-4  # bound vs attained margin, plus SOUNDNESS_RTOL·|margin|: float32
SOUNDNESS_RTOL = 1e-4


class SoundnessError(AssertionError):
    """A bound or an attack contradicts another: a bug in the harness, never a result."""


@dataclass
class Evaluation:
    """Per-member, per-sample outcomes of the trusted evaluation (tensors [M, N...])."""

    clean_correct: Tensor
    clean_margins: Tensor  # [M, N, K]
    ibp_margins: Tensor
    crown_margins: Tensor
    broken: Tensor  # PGD found a misclassified point (the clean input counts)
    min_margins: Tensor  # smallest margins over every point PGD evaluated
    grid: list[float] = field(default_factory=list)
    ibp_grid: Tensor | None = None  # [G, M, N] IBP-verified per ε in the grid
    verified_grid: Tensor | None = None  # [G, M, N] IBP- or CROWN-verified
    wall_time: float = 0.0

    @property
    def ibp_verified(self) -> Tensor:
        return _verified(self.ibp_margins)

    @property
    def crown_verified(self) -> Tensor:
        return _verified(self.crown_margins)



def final_plain_params(net: Net, params: dict[str, Tensor], x_train: Tensor,
                       max_samples: int = 10_000) -> dict[str, Tensor]:
    """Stacked ``plain`` parameters: BatchNorm recalibrated on the training set and folded."""
    if not net.batch_norm:
        return net.fold(params, {})
    x = x_train[:max_samples]
    members = next(iter(params.values())).shape[0]
    folded = []
    for m in range(members):
        p = {k: v[m] for k, v in params.items()}
        folded.append(net.fold(p, recalibrate(net, p, x)))
    return {k: torch.stack([f[k] for f in folded]) for k in folded[0]}


@torch.no_grad()
def evaluate(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor, box: Box,
             eps: float, generators: list[torch.Generator], pgd: PGDConfig | None = None,
             *, grid: list[float] | None = None, chunk: int = 1024) -> Evaluation:
    """The trusted evaluation of stacked ``params`` ([M, ...]) of ``model`` at ``eps``."""
    start = time.perf_counter()
    pgd = pgd or PGDConfig()

    def margins_of(fn: Callable[..., Tensor], e: float) -> Tensor:
        batched = vmap(lambda p, xs, ys: fn(model, p, xs, e, ys), in_dims=(0, None, None))
        return torch.cat([batched(params, x[i:i + chunk], y[i:i + chunk])
                          for i in range(0, len(x), chunk)], dim=1)

    forward = vmap(lambda p, xs: functional_call(model, p, (xs,)), in_dims=(0, None))
    clean = torch.cat([forward(params, x[i:i + chunk]) for i in range(0, len(x), chunk)], 1)
    members = clean.shape[0]
    yb = y.expand(members, -1)
    lower, upper = box.limits(x, eps)
    attack = pgd_evaluate(model, params, x, y, lower, upper, box.radius(eps), generators, pgd,
                          chunk=max(chunk, 256))
    result = Evaluation(
        clean_correct=clean.argmax(-1) == yb,
        clean_margins=clean.gather(-1, yb[..., None]) - clean,
        ibp_margins=margins_of(box.ibp, eps),
        crown_margins=margins_of(box.crown, eps),
        broken=attack.broken,
        min_margins=attack.min_margins,
        grid=list(grid or []),
    )
    if grid:
        ibp_grid, verified_grid = [], []
        for e in grid:
            if e == eps:
                ibp_v = result.ibp_verified
                verified_grid.append(ibp_v | result.crown_verified)
            else:
                ibp_v = _verified(margins_of(box.ibp, e))
                verified_grid.append(_or_crown(model, params, x, y, box, e, ibp_v, result,
                                               e > eps, chunk))
            ibp_grid.append(ibp_v)
        result.ibp_grid, result.verified_grid = torch.stack(ibp_grid), torch.stack(verified_grid)
    result.wall_time = time.perf_counter() - start
    return result


def _or_crown(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor, box: Box,
              eps: float, ibp_v: Tensor, main: Evaluation, larger: bool, chunk: int) -> Tensor:
    """IBP- or CROWN-verified at ``eps``, running CROWN only where it can change the answer.

    Skipped: samples IBP verifies, samples misclassified clean and, when ``eps`` exceeds
    ε_test, samples PGD broke at ε_test (the counterexample lies in the larger box too),
    for every member at once. At ε = 0 IBP's margins are exact, so CROWN never runs.
    """
    need = ~ibp_v & main.clean_correct
    if larger:
        need &= ~main.broken
    index = need.any(0).nonzero().flatten()
    out = ibp_v.clone()
    if eps == 0 or len(index) == 0:
        return out
    xs, ys = x[index], y[index]
    batched = vmap(lambda p, xc, yc: box.crown(model, p, xc, eps, yc), in_dims=(0, None, None))
    crown = torch.cat([_verified(batched(params, xs[i:i + chunk], ys[i:i + chunk]))
                       for i in range(0, len(index), chunk)], dim=1)
    out[:, index] |= crown
    return out


def judge_member(ev: Evaluation, m: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Metrics and plot curves of member ``m``; raises :class:`SoundnessError` first if the
    evaluation contradicts itself."""
    check_soundness(ev, m)
    ibp_v, crown_v = ev.ibp_verified[m], ev.crown_verified[m]
    verified = ibp_v | crown_v
    k = ev.clean_margins.shape[-1]
    metrics = {
        "verified_acc": _mean(verified),
        "clean_acc": _mean(ev.clean_correct[m]),
        "pgd_acc": _mean(~ev.broken[m]),
        "ibp_verified_acc": _mean(ibp_v),
        "crown_verified_acc": _mean(crown_v),
        # mean over samples and the K−1 other classes of (attained margin − lower bound)
        "ibp_gap": float((ev.clean_margins[m] - ev.ibp_margins[m]).sum(-1).mean()) / (k - 1),
        "crown_gap": float((ev.clean_margins[m] - ev.crown_margins[m]).sum(-1).mean()) / (k - 1),
    }
    curves: dict[str, list[float]] = {}
    if ev.grid:
        curves["eps_grid"] = list(ev.grid)
        curves["ibp_verified_vs_eps"] = ev.ibp_grid[:, m].float().mean(-1).tolist()
        curves["verified_vs_eps"] = ev.verified_grid[:, m].float().mean(-1).tolist()
    return metrics, curves


def check_soundness(ev: Evaluation, m: int) -> None:
    """Per sample: verified ⇒ PGD-correct ⇒ clean-correct, and every margin lower bound is
    at most the margin attained at every point PGD evaluated (within float32 tolerance)."""
    problems = []
    verified = ev.ibp_verified[m] | ev.crown_verified[m]
    pgd_correct, clean = ~ev.broken[m], ev.clean_correct[m]
    for what, bad in (("verified but broken by PGD", verified & ~pgd_correct),
                      ("PGD-correct but misclassified clean", pgd_correct & ~clean),
                      ("verified but misclassified clean", verified & ~clean)):
        if bool(bad.any()):
            problems.append(f"{int(bad.sum())} samples {what} (first: {_first(bad)})")
    attained = torch.minimum(ev.min_margins[m], ev.clean_margins[m])
    slack = SOUNDNESS_ATOL + SOUNDNESS_RTOL * attained.abs()
    for name, lower in (("IBP", ev.ibp_margins[m]), ("CROWN", ev.crown_margins[m])):
        over = lower > attained + slack
        if bool(over.any()):
            worst = float((lower - attained).max())
            problems.append(f"{name} margin lower bound above an attained margin for "
                            f"{int(over.any(-1).sum())} samples (by up to {worst:.3g}; "
                            f"first: {_first(over.any(-1))})")
    if problems:
        raise SoundnessError("; ".join(problems))


def _verified(margins: Tensor) -> Tensor:
    return bounds.verified(margins.flatten(0, -2)).view(margins.shape[:-1])


def _mean(t: Tensor) -> float:
    return float(t.float().mean())


def _first(mask: Tensor) -> int:
    return int(mask.nonzero()[0, 0])

