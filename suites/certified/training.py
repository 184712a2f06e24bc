"""How an objective trains on the certified suite: which hook, which network options, and
the member loss the seed-batched trainer minimises (one member; vmapped over members)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn
from torch.func import functional_call

from harness.contract import seeding
from harness.contract.pipeline import InvalidOutput
from harness.contract.suite import Suite, Variant
from harness.objectives.loading import LoadedObjective
from harness.train import TrainConfig, with_state
from suites.certified import bounds
from suites.certified.attack import pgd_train_inputs
from suites.certified.data import Box, Dataset
from suites.certified.models import Net, certified_cnn, certified_mlp
from suites.certified.schedule import Schedule

MODEL_OPTIONS = {"batch_norm": (bool,), "init": (str,)}


@dataclass(frozen=True)
class Training:
    """How an objective trains here, decided from its hooks alone."""

    kind: str  # "natural" (the reference), "lifted" (classification_loss), "certified"
    hook: str
    wants: frozenset[str]
    batch_norm: bool = False
    init: str = "default"



def training_for(objective: LoadedObjective, suite: Suite) -> Training:
    """Natural for the suite's reference built-in, the objective's own ``certified_loss``
    when it has one, else its ``classification_loss`` lifted with the IBP mixing."""
    (hook,) = suite.hooks
    if hook in objective.hooks:
        options = model_options(objective)
        return Training("certified", hook, frozenset(objective.context.get(hook, ())),
                        **options)
    if "classification_loss" not in objective.hooks:
        raise ValueError(f"{objective.name} defines neither {hook} nor "
                         f"classification_loss, so it cannot run on the {suite.name} suite")
    kind = "natural" if (objective.origin == "builtin" and objective.name == suite.reference) \
        else "lifted"
    return Training(kind, "classification_loss",
                    frozenset(objective.context.get("classification_loss", ())))


def model_options(objective: LoadedObjective) -> dict[str, Any]:
    """The module-level ``MODEL = {"batch_norm": ..., "init": ...}`` an objective declares."""
    declared = {} if objective.model is None else objective.model
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


def reported_training(info: Mapping[str, Any]) -> Training:
    """The model options the trainer says it used, accepted only within the suite's options."""
    t = info.get("training")
    if not isinstance(t, dict):
        raise InvalidOutput("the trainer did not report how it trained")
    kind, hook = t.get("kind"), t.get("hook")
    batch_norm, init = t.get("batch_norm", False), t.get("init", "default")
    if kind not in ("natural", "lifted", "certified") or not isinstance(hook, str) \
            or not isinstance(batch_norm, bool) or init not in ("default", "ibp"):
        raise InvalidOutput(f"unknown training options {t!r}")
    return Training(kind, hook, frozenset(), batch_norm=batch_norm, init=init)


def config_of(suite: Suite, variant: Variant) -> TrainConfig:
    """The suite's optimisation settings, with the variant's overrides (real data's batch)."""
    return TrainConfig.from_settings({**suite.settings, **variant.config.get("settings", {})})


def schedule_of(suite: Suite, variant: Variant) -> Schedule:
    p = suite.settings
    return Schedule(eps_max=p["eps_train_factor"] * variant.config["eps"],
                    warmup=p["warmup"], ramp=p["ramp"])


def model_for(data: Dataset, training: Training) -> Net:
    options = {"batch_norm": training.batch_norm, "init": training.init}
    with seeding.torch_global():  # building draws: from nobody else's stream
        if data.x_train.ndim == 2:
            return certified_mlp((data.x_train.shape[1], 128, 128, data.num_classes),
                                 **options)
        return certified_cnn(data.x_train.shape[1], data.x_train.shape[2], data.num_classes,
                             **options)


def member_loss(net: Net, objective: LoadedObjective, training: Training, schedule: Schedule,
                box: Box, *, train_pgd_steps: int = 10) -> Callable[..., Tensor]:
    """``(params, batch, state, progress) -> loss`` for ONE member; ``batch`` holds its
    inputs ``x``, labels ``y`` and their training-set ``index``."""
    hook = objective.bind(training.hook)
    wants = training.wants
    affine = [i for i, layer in enumerate(net.plain.children())
              if isinstance(layer, nn.Linear | nn.Conv2d)]

    def worst_logits(params: dict[str, Tensor], xb: Tensor, yb: Tensor, eps: float) -> Tensor:
        return bounds.worst_case_logits(box.ibp(net.plain, params, xb, eps, yb))

    def loss(p, batch, state, progress):
        xb, yb, index = batch["x"], batch["y"], batch["index"]
        eps = schedule.eps(progress)
        logits, stats = net.forward(p, xb)
        context: dict[str, Any] = {"progress": progress, "state": state, "index": index}
        if "hyper" in batch:  # a tuned run's trial: this member's own hyperparameters
            context["hyper"] = batch["hyper"]
        if training.kind == "natural":
            return with_state(hook, logits, yb, **context)
        plain = net.fold(p, stats)
        if training.kind == "lifted":
            kappa = schedule.kappa(progress)
            natural = with_state(hook, logits, yb, **context)
            if kappa >= 1.0:  # the warm-up: (1 − κ)·L(worst) is exactly 0
                return natural
            robust = with_state(hook, worst_logits(plain, xb, yb, eps), yb, **context)
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
        return with_state(hook, logits, worst_logits(plain, xb, yb, eps), yb, **context)

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

