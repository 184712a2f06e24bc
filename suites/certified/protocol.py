"""Train inside, judge outside: certified training, then a trusted evaluation.

Training: every seed of one variant trains as one seed-batched ``train_members`` run,
with a member loss built here from the objective's hook (``certified_loss``, or its
``classification_loss`` lifted with the IBP mixing; the suite's reference ``ce`` trains
naturally). The objective sees training batches, the logits, worst-case logits from
bounds and whatever context it asks for by name; never test data or metric code.

Evaluation, on the test set, from the trained weights only: clean accuracy, PGD
accuracy, IBP- and CROWN-verified accuracy and the headline verified accuracy (a
sample counts if either bound verifies it), bound gaps, verified accuracy over an ε
grid. A soundness check runs on every evaluation; a violation is a harness bug and
fails the cell loudly.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from harness import bounds, seeding
from harness.objectives.loading import Objective
from harness.train import ObjectiveRuntimeError, Protocol, train_members
from suites.base import CellResult, Suite, Variant
from suites.certified.attack import PGDConfig, pgd_evaluate, pgd_train_inputs
from suites.certified.models import Net, certified_cnn, certified_mlp, recalibrate
from suites.certified.schedule import Schedule
from suites.jobs import InvalidOutput, Job, check_array

log = logging.getLogger(__name__)

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)
MODEL_OPTIONS = {"batch_norm": (bool,), "init": (str,)}
SOUNDNESS_ATOL = 1e-4  # bound vs attained margin, plus SOUNDNESS_RTOL·|margin|: float32
SOUNDNESS_RTOL = 1e-4


class SoundnessError(AssertionError):
    """A bound or an attack contradicts another: a bug in the harness, never a result."""


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray  # model inputs (normalised where the dataset is)
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    mean: tuple[float, ...] | None = None  # per-channel normalisation (CIFAR)
    std: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Box:
    """The threat model in model-input space: the pixel ε-ball ∩ [0, 1]^d, normalised.

    With normalisation ``(x − μ_c)/σ_c`` the radius is ε/σ_c per channel and the box is
    clipped to ``[−μ_c/σ_c, (1 − μ_c)/σ_c]`` (PROTOCOLS §2.1); without, it is ε and [0, 1].
    """

    scale: Tensor | float = 1.0  # 1/σ_c, shaped [C, 1, 1]
    x_min: Tensor | float = 0.0
    x_max: Tensor | float = 1.0

    @classmethod
    def of(cls, data: Dataset, device: str = "cpu") -> Box:
        if data.std is None:
            return cls()
        mean = torch.tensor(data.mean, device=device).view(-1, 1, 1)
        std = torch.tensor(data.std, device=device).view(-1, 1, 1)
        return cls(1.0 / std, -mean / std, (1.0 - mean) / std)

    def radius(self, eps: float) -> Tensor | float:
        return eps * self.scale

    def limits(self, x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        return bounds.input_box(x, self.radius(eps), self.x_min, self.x_max)

    def ibp(self, model: nn.Module, params: dict[str, Tensor], x: Tensor, eps: float,
            y: Tensor) -> Tensor:
        return bounds.ibp_margins(model, params, x, self.radius(eps), y, x_min=self.x_min,
                                  x_max=self.x_max)

    def crown(self, model: nn.Module, params: dict[str, Tensor], x: Tensor, eps: float,
              y: Tensor, intermediate: str = "crown") -> Tensor:
        return bounds.crown_margins(model, params, x, self.radius(eps), y,
                                    intermediate=intermediate, x_min=self.x_min,
                                    x_max=self.x_max)


@dataclass(frozen=True)
class Training:
    """How an objective trains here, decided from its hooks alone."""

    kind: str  # "natural" (the reference), "lifted" (classification_loss), "certified"
    hook: str
    wants: frozenset[str]
    batch_norm: bool = False
    init: str = "default"


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


# --- running cells ------------------------------------------------------------------

def prepare(suite: Suite, variants: list[Variant], seeds: list[int], *,
            data_root: str | None = None, download: bool = False) -> list[Job]:
    """One job per variant: training data and unlabeled test inputs; test labels stay here."""
    datasets: dict[str, Dataset] = {}
    jobs = []
    for variant in variants:
        name = variant.config["dataset"]
        if name not in datasets:
            datasets[name] = load_dataset(name, data_root, download)
        data = datasets[name]
        jobs.append(Job([(variant.name, s) for s in seeds],
                        {"x_train": data.x_train, "y_train": data.y_train,
                         "x_eval": data.x_test},
                        {"variant": variant.name, "seeds": list(seeds),
                         "num_classes": data.num_classes,
                         "mean": list(data.mean) if data.mean else None,
                         "std": list(data.std) if data.std else None},
                        private=data))
    return jobs


def train(suite: Suite, objective: Objective, inputs: dict[str, np.ndarray], plan: dict, *,
          device: str = "cpu", mode: str = "auto",
          progress: Callable[[float], None] | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Train one variant's members; stacked weights and curves out (judged by :func:`judge`)."""
    try:
        training = training_for(objective, suite)
    except ValueError as exc:
        raise ObjectiveRuntimeError(str(exc)) from exc
    variant = suite.variant(plan["variant"])
    seeds = plan["seeds"]
    data = Dataset(inputs["x_train"], inputs["y_train"], inputs["x_eval"],
                   np.zeros(0, dtype=np.int64), plan["num_classes"],
                   tuple(plan["mean"]) if plan["mean"] else None,
                   tuple(plan["std"]) if plan["std"] else None)
    protocol, schedule = protocol_of(suite, variant), schedule_of(suite, variant)
    net = model_for(data, training)
    loss = member_loss(net, objective, training, schedule, Box.of(data, device),
                       train_pgd_steps=suite.protocol["train_pgd_steps"])
    labels = torch.from_numpy(data.y_train).expand(len(seeds), -1).contiguous()

    def on_epoch(epoch: int, total: int) -> None:
        if progress is not None:
            progress(len(seeds) / total)

    trained = train_members(
        net.train, None, torch.from_numpy(data.x_train), labels, seeds, protocol,
        eval_inputs=torch.from_numpy(data.x_test), mode=mode, device=device,
        on_epoch=on_epoch, member_loss=loss)
    outputs = {f"param:{k}": v.numpy() for k, v in trained.params.items()}
    outputs.update({
        "eval_predictions": trained.eval_predictions.numpy(),
        "loss_curve": trained.loss_curve.numpy(),
        "grad_norm_curve": trained.grad_norm_curve.numpy(),
        "diverged_step": np.array([-1 if d is None else d for d in trained.diverged_step],
                                  dtype=np.int64)})
    report = {"mode": trained.mode, "fallback_reason": trained.fallback_reason,
              "wall_time": trained.wall_time,
              "training": {"kind": training.kind, "hook": training.hook,
                           "batch_norm": training.batch_norm, "init": training.init}}
    return outputs, report


def judge(suite: Suite, job: Job, outputs: dict[str, np.ndarray], report: dict,
          device: str = "cpu") -> list[CellResult]:
    """The trusted evaluation of the returned weights, after checking every array."""
    data: Dataset = job.private
    variant = suite.variant(job.plan["variant"])
    seeds = job.plan["seeds"]
    training = _reported_training(report)
    protocol, schedule = protocol_of(suite, variant), schedule_of(suite, variant)
    net = model_for(data, training)
    m, epochs = len(seeds), protocol.epochs
    steps_per_epoch = -(-len(data.y_train) // protocol.batch_size)
    diverged = check_array(outputs, "diverged_step", (m,), "iu", low=-1,
                           high=steps_per_epoch * epochs)
    alive = [i for i in range(m) if diverged[i] < 0]
    params = {}
    for name, p in net.train.named_parameters():
        a = check_array(outputs, f"param:{name}", (m, *p.shape), "f")
        if alive and not np.isfinite(a[alive]).all():
            raise InvalidOutput(f"param:{name} is not finite for a member that did not diverge")
        params[name] = torch.from_numpy(np.array(a, dtype=np.float32))  # own, writable copy
    eval_pred = check_array(outputs, "eval_predictions", (epochs, m, len(data.y_test)), "iu",
                            low=0, high=data.num_classes - 1)
    loss_curve = check_array(outputs, "loss_curve", (m, epochs), "f")
    grad_curve = check_array(outputs, "grad_norm_curve", (m, epochs), "f")

    params = {k: v.to(device) for k, v in params.items()}
    plain = final_plain_params(net, params, torch.from_numpy(data.x_train).to(device))
    generators = [torch.Generator().manual_seed(seeding.stream_seed(s, "attack", variant.name))
                  for s in seeds]
    p = suite.protocol
    grid = [g * variant.config["eps"] for g in p["eps_grid"]]
    row = {i: r for r, i in enumerate(alive)}  # member -> its row in the evaluation
    evaluation = None
    if alive:  # a diverged member's frozen weights are not evaluated
        evaluation = evaluate(net.plain, {k: v[alive] for k, v in plain.items()},
                              torch.from_numpy(data.x_test).to(device),
                              torch.from_numpy(data.y_test).to(device), Box.of(data, device),
                              variant.config["eps"], [generators[i] for i in alive],
                              PGDConfig(**p["pgd"]), grid=grid,
                              chunk=p["eval_chunk"] if data.x_test.ndim == 2 else 16)
    eval_time = evaluation.wall_time if evaluation is not None else 0.0
    train_time = float(report.get("wall_time") or 0.0)
    total_steps = steps_per_epoch * epochs
    eps_curve = [schedule.eps((e + 1) * steps_per_epoch / total_steps) for e in range(epochs)]
    info = {"mode": str(report.get("mode", "")), "fallback_reason": report.get("fallback_reason"),
            "members_batched": m, "training": training.kind,
            "batch_norm": training.batch_norm, "init": training.init,
            "eps_test": variant.config["eps"], "eps_train": schedule.eps_max,
            "train_time": train_time / m, "eval_time": eval_time / m}
    per_cell = (train_time + eval_time) / m
    out = []
    for i, seed in enumerate(seeds):
        curves = {"train_loss": loss_curve[i].tolist(), "grad_norm": grad_curve[i].tolist(),
                  "clean_acc": (eval_pred[:, i] == data.y_test[None]).mean(1).tolist(),
                  "eps_schedule": eps_curve}
        if diverged[i] >= 0:  # a frozen model's accuracy is not a result
            step = int(diverged[i])
            curves = {k: v[:step // steps_per_epoch + 1] for k, v in curves.items()}
            out.append(CellResult(variant.name, seed, "diverged", {}, curves,
                                  diverged_step=step, wall_time=per_cell, info=info))
            continue
        try:
            metrics, eval_curves = judge_member(evaluation, row[i])
        except SoundnessError as exc:
            log.error("harness bug on %s seed %s: %s", variant.name, seed, exc)
            out.append(CellResult(variant.name, seed, "failed", {}, curves,
                                  error=f"harness bug: soundness violated: {exc}",
                                  wall_time=per_cell, info=info, reason="infrastructure"))
            continue
        out.append(CellResult(variant.name, seed, "ok", metrics, {**curves, **eval_curves},
                              wall_time=per_cell, info=info))
    return out


def _reported_training(report: dict) -> Training:
    """The model options the trainer says it used, accepted only within the suite's options."""
    t = report.get("training")
    if not isinstance(t, dict):
        raise InvalidOutput("the trainer did not report how it trained")
    kind, hook = t.get("kind"), t.get("hook")
    batch_norm, init = t.get("batch_norm", False), t.get("init", "default")
    if kind not in ("natural", "lifted", "certified") or not isinstance(hook, str) \
            or not isinstance(batch_norm, bool) or init not in ("default", "ibp"):
        raise InvalidOutput(f"unknown training options {t!r}")
    return Training(kind, hook, frozenset(), batch_norm=batch_norm, init=init)


def training_for(objective: Objective, suite: Suite) -> Training:
    """Natural for the suite's reference built-in, the objective's own ``certified_loss``
    when it has one, else its ``classification_loss`` lifted with the IBP mixing."""
    if suite.hook in objective.hooks:
        options = model_options(objective, suite.hook)
        return Training("certified", suite.hook, frozenset(objective.context.get(suite.hook, ())),
                        **options)
    if "classification_loss" not in objective.hooks:
        raise ValueError(f"{objective.name} defines neither {suite.hook} nor "
                         f"classification_loss, so it cannot run on the {suite.name} suite")
    kind = "natural" if (objective.origin == "builtin" and objective.name == suite.reference) \
        else "lifted"
    return Training(kind, "classification_loss",
                    frozenset(objective.context.get("classification_loss", ())))


def model_options(objective: Objective, hook: str) -> dict[str, Any]:
    """The module-level ``MODEL = {"batch_norm": ..., "init": ...}`` an objective declares."""
    fn = inspect.unwrap(objective.hooks[hook])
    declared = getattr(fn, "__globals__", {}).get("MODEL", {})
    if not isinstance(declared, dict):
        raise ValueError(f"{objective.name}: MODEL must be a dict like "
                         f"{{'batch_norm': True, 'init': 'ibp'}}, got {declared!r}")
    for key, value in declared.items():
        if key not in MODEL_OPTIONS or not isinstance(value, MODEL_OPTIONS[key]):
            raise ValueError(f"{objective.name}: MODEL[{key!r}] = {value!r} is not an option "
                             f"(options: batch_norm: bool, init: 'default' | 'ibp')")
    if declared.get("init", "default") not in ("default", "ibp"):
        raise ValueError(f"{objective.name}: MODEL['init'] must be 'default' or 'ibp'")
    return dict(declared)


def protocol_of(suite: Suite, variant: Variant) -> Protocol:
    p = {**suite.protocol, **variant.config.get("protocol", {})}
    return Protocol(epochs=p["epochs"], batch_size=p["batch_size"], lr=p["lr"],
                    momentum=p["momentum"], weight_decay=p["weight_decay"],
                    grad_clip=p["grad_clip"], schedule=p["lr_schedule"])


def schedule_of(suite: Suite, variant: Variant) -> Schedule:
    p = suite.protocol
    return Schedule(eps_max=p["eps_train_factor"] * variant.config["eps"],
                    warmup=p["warmup"], ramp=p["ramp"])


# --- the member loss (one member; vmapped over members by train_members) -------------

def member_loss(net: Net, objective: Objective, training: Training, schedule: Schedule,
                box: Box, *, train_pgd_steps: int = 10) -> Callable[..., Tensor]:
    """``(params, xb, yb, index, state, progress) -> loss`` for ONE member."""
    hook = objective.bind(training.hook)
    wants = training.wants
    affine = [i for i, layer in enumerate(net.plain.children())
              if isinstance(layer, nn.Linear | nn.Conv2d)]

    def worst_logits(params: dict[str, Tensor], xb: Tensor, yb: Tensor, eps: float) -> Tensor:
        return bounds.worst_case_logits(box.ibp(net.plain, params, xb, eps, yb))

    def loss(p, xb, yb, index, state, progress):
        eps = schedule.eps(progress)
        logits, stats = net.forward(p, xb)
        context: dict[str, Any] = {"progress": progress, "index": index, "state": state}
        if training.kind == "natural":
            return hook(logits, yb, **context)
        plain = net.fold(p, stats)
        if training.kind == "lifted":
            kappa = schedule.kappa(progress)
            natural = hook(logits, yb, **context)
            if kappa >= 1.0:  # the warm-up: (1 − κ)·L(worst) is exactly 0
                return natural
            robust = hook(worst_logits(plain, xb, yb, eps), yb, **context)
            return kappa * natural + (1.0 - kappa) * robust
        context.update(eps=eps, eps_max=schedule.eps_max)
        if "bounds" in wants:
            lower, upper = box.limits(xb, eps)
            layers = bounds.interval_bounds(net.plain, plain, lower, upper)
            context["bounds"] = [(lower, upper)] + [layers[i] for i in affine]
        if "crown_ibp_worst_logits" in wants:  # lazy: the hook calls it while it is needed
            context["crown_ibp_worst_logits"] = lambda: bounds.worst_case_logits(
                box.crown(net.plain, plain, xb, eps, yb, intermediate="ibp"))
        if "adv_logits" in wants:
            context["adv_logits"] = _adversarial_logits(net.plain, plain, xb, yb, eps, box,
                                                        index, progress, train_pgd_steps)
        return hook(logits, worst_logits(plain, xb, yb, eps), yb, **context)

    return loss


def _adversarial_logits(model: nn.Module, params: dict[str, Tensor], xb: Tensor, yb: Tensor,
                        eps: float, box: Box, index: Tensor, progress: float,
                        steps: int) -> Tensor:
    if eps > 0:
        frozen = {k: v.detach() for k, v in params.items()}
        lower, upper = box.limits(xb, eps)
        xb = pgd_train_inputs(lambda xs: functional_call(model, frozen, (xs,)), xb, yb,
                              lower, upper, box.radius(eps), index,
                              salt=int(progress * 2**31), steps=steps)
    return functional_call(model, params, (xb,))


# --- trusted evaluation ----------------------------------------------------------------

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


# --- data and models ---------------------------------------------------------------------

def load_dataset(name: str, data_root: str | None, download: bool) -> Dataset:
    if name == "digits":
        from suites.noisy_labels.data import digits_split

        x_tr, y_tr, x_te, y_te = digits_split()
        return Dataset(x_tr, y_tr, x_te, y_te, 10)
    from harness.data import real

    root = data_root or os.environ.get("HARNESS_DATA", str(Path.home() / ".cache" / "harness"))
    if name == "mnist":
        ds = real.load_mnist(root, download=download)
        return Dataset(ds.x_train, ds.y_train, ds.x_test, ds.y_test, ds.num_classes)
    if name == "cifar10":
        ds = real.load_cifar10(root, download=download)
        mean = np.array(CIFAR_MEAN, dtype=np.float32).reshape(1, 3, 1, 1)
        std = np.array(CIFAR_STD, dtype=np.float32).reshape(1, 3, 1, 1)
        return Dataset((ds.x_train - mean) / std, ds.y_train, (ds.x_test - mean) / std,
                       ds.y_test, ds.num_classes, CIFAR_MEAN, CIFAR_STD)
    raise ValueError(f"unknown dataset {name!r}")


def model_for(data: Dataset, training: Training) -> Net:
    options = {"batch_norm": training.batch_norm, "init": training.init}
    if data.x_train.ndim == 2:
        return certified_mlp((data.x_train.shape[1], 128, 128, data.num_classes), **options)
    return certified_cnn(data.x_train.shape[1], data.x_train.shape[2], data.num_classes,
                         **options)
