"""Seed-batched training: M models trained as one stacked model.

Every *member* (one cell: a variant's data and a seed) has its own parameters, stacked
along a leading dimension, and starts from them (a fresh init per seed, or a checkpoint
per seed). Each step, the sampler gives every member its batch; the suite's member loss
runs under ``torch.func.vmap``; the members' losses are summed and backpropagated once,
and one update of the stacked tensors (:mod:`harness.train.optim`) is exactly one
optimizer per member. Gradient clipping uses per-member norms.

A loss that cannot be vmapped (``.item()``, Python control flow on tensor values,
random ops) falls back to a per-member loop over the same stacked tensors, which gives
the same numbers up to float rounding of the batched matrix products; the result says
which mode ran. A member whose loss turns non-finite is frozen at zero and its step
recorded; the others train on unaffected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_map

from harness.train.batches import Batch, Sampler
from harness.train.config import PerMember, TrainConfig
from harness.train.optim import StackedOptimizer, clip_coefficients, grad_norms

LossFn = Callable[..., Tensor]
# One member's loss from its parameters, its batch, its per-sample state and progress.
MemberLoss = Callable[[dict[str, Tensor], Batch, Tensor, float], Tensor]


@dataclass
class TrainResult:
    """What training returns: parameters, curves and per-epoch evaluations, never a metric."""

    params: dict[str, Tensor]  # [M, ...] after the last epoch (on the CPU)
    loss_curve: Tensor  # [M, E] mean training loss per epoch
    grad_norm_curve: Tensor  # [M, E] mean pre-clipping gradient norm per epoch
    diverged_step: list[int | None]  # per member: first step with a non-finite loss
    mode: str  # "vmap" or "loop"
    fallback_reason: str = ""
    evaluations: Tensor | None = None  # [E, M, ...] the ``evaluate`` callback per epoch
    epoch_params: dict[str, Tensor] = field(default_factory=dict)  # [E, M, ...] when kept
    wall_time: float = 0.0


class ObjectiveRuntimeError(RuntimeError):
    """The objective raised while training; ``__cause__`` is the user's exception."""


def train_members(
    member_loss: MemberLoss,
    params: Mapping[str, Tensor],
    batches: Sampler,
    config: TrainConfig,
    *,
    mode: str = "auto",
    device: str = "cpu",
    evaluate: Callable[[dict[str, Tensor]], Tensor] | None = None,
    cells_done: Callable[[float], None] | None = None,
    keep_epoch_params: bool = False,
    per_member: PerMember | None = None,
) -> TrainResult:
    """Train every member from ``params`` (stacked ``[M, ...]``) for ``config.epochs``.

    ``member_loss(params, batch, state, progress)`` returns ONE member's per-sample
    ``[B]`` or scalar loss; ``state`` is that member's per-sample memory (``[N]``, NaN
    until a loss writes it). ``mode`` is "auto", "vmap" or "loop". ``evaluate(params)``
    runs after every epoch without gradients (e.g. test predictions) and its results are
    stacked. ``cells_done(cells)`` is called after every epoch with the cells finished
    since the last call (members / epochs): a pipeline's progress report.
    ``keep_epoch_params`` also returns every epoch's parameters, so that a judge can
    recompute each epoch's predictions itself. ``per_member`` gives members learning rates,
    weight decays and hyperparameters of their own (a tuned run's trials): the
    hyperparameters reach the member loss in its batch, as ``batch["hyper"]``.
    """
    start = time.perf_counter()
    params = {k: _stored(v.detach().to(device), config.weight_layout).requires_grad_()
              for k, v in params.items()}
    members = next(iter(params.values())).shape[0]
    if batches.members != members:
        raise ValueError(f"{members} members' parameters but batches for {batches.members}")
    batches = batches.to(device)
    leaves = list(params.values())
    lrs, decay, hyper = _per_member_tensors(per_member, members, device)
    optimizer = StackedOptimizer(leaves, config.optimizer, decay)
    state = torch.full((members, batches.size), float("nan"), device=device)
    steps_per_epoch = batches.steps_per_epoch
    total = steps_per_epoch * config.epochs
    alive = torch.ones(members, dtype=torch.bool, device=device)
    diverged: list[int | None] = [None] * members
    loss_curve = torch.zeros(members, config.epochs)
    grad_curve = torch.zeros(members, config.epochs)
    evaluations: list[Tensor] = []
    history: list[dict[str, Tensor]] = []
    step_fn = _vmapped_step(member_loss) if mode != "loop" else None
    fallback_reason = ""

    step = 0
    for epoch in range(config.epochs):
        loss_sum = torch.zeros(members, device=device)
        grad_sum = torch.zeros(members, device=device)
        for j in range(steps_per_epoch):
            batch = batches.batch(epoch, j)
            if hyper:
                batch = {**batch, "hyper": hyper}
            progress = step / total
            if step_fn is not None:
                try:
                    # a tuned run's hyperparameters are tensors: a hook may branch on one
                    # late (after a warm-up), so such a run may fall back at any step
                    snapshot = state.clone() if mode == "auto" and (
                        step == 0 or hyper) else None
                    losses = step_fn(params, batch, state, progress)
                except Exception as exc:
                    if snapshot is None:
                        raise ObjectiveRuntimeError(_describe(exc)) from exc
                    state.copy_(snapshot)
                    step_fn, fallback_reason = None, _describe(exc)
            if step_fn is None:
                try:
                    losses = _loop_step(member_loss, params, batch, state, progress)
                except Exception as exc:
                    raise ObjectiveRuntimeError(_describe(exc)) from exc
            newly = ~torch.isfinite(losses) & alive
            if newly.any():
                for m in newly.nonzero().flatten().tolist():
                    diverged[m] = step
                alive &= ~newly
            for leaf in leaves:
                leaf.grad = None
            _backward(torch.where(alive, losses, torch.zeros_like(losses)).sum())
            for leaf in leaves:  # a loss that does not reach a parameter leaves it be
                if leaf.grad is None:
                    leaf.grad = torch.zeros_like(leaf)
            if newly.any():  # after backward: the graph still holds the old weights
                optimizer.zero_members(newly)
            norms = grad_norms(leaves, alive)
            lr = config.lr_at(step, total) if lrs is None else lrs * config.schedule_at(
                step, total)
            optimizer.step(lr, clip_coefficients(norms, config.grad_clip))
            loss_sum += losses.detach().nan_to_num(0.0) * _batch_len(batch)
            grad_sum += norms
            step += 1
        loss_curve[:, epoch] = (loss_sum / batches.size).cpu()
        grad_curve[:, epoch] = (grad_sum / steps_per_epoch).cpu()
        if evaluate is not None:
            with torch.no_grad():
                evaluations.append(evaluate(params).cpu())
        if keep_epoch_params:
            history.append({k: v.detach().cpu().clone() for k, v in params.items()})
        if cells_done is not None:
            cells_done(members / config.epochs)
    return TrainResult(
        params={k: v.detach().cpu() for k, v in params.items()},
        loss_curve=loss_curve,
        grad_norm_curve=grad_curve,
        diverged_step=diverged,
        mode="vmap" if step_fn is not None else "loop",
        fallback_reason=fallback_reason,
        evaluations=torch.stack(evaluations) if evaluations else None,
        epoch_params={k: torch.stack([h[k] for h in history]) for k in params} if history
        else {},
        wall_time=time.perf_counter() - start,
    )


def classification_member_loss(model: nn.Module, loss_fn: LossFn) -> MemberLoss:
    """The member loss of a classification hook on batches ``{"x", "y", "index"}``:
    ``loss_fn(model(x), y, progress=, state=)``, and ``hyper=`` the member's own
    hyperparameters where the batch carries them (``PerMember``)."""
    def member_loss(p, batch, state, progress):
        logits = functional_call(model, p, (batch["x"],))
        own = {"hyper": batch["hyper"]} if "hyper" in batch else {}
        return with_state(loss_fn, logits, batch["y"], state=state, index=batch["index"],
                          progress=progress, **own)

    return member_loss


def _per_member_tensors(per_member: PerMember | None, members: int, device: str
                        ) -> tuple[Tensor | None, Tensor | None, dict[str, Tensor]]:
    """Learning rates ``[M]`` (float64: the schedule multiplies them before the optimizer
    rounds), weight decays ``[M]`` and hyperparameters ``{name: [M]}`` (float64 for floats,
    which a float32 hook's arithmetic keeps at float32, int64 for ints) of ``per_member``."""
    if per_member is None:
        return None, None, {}
    if per_member.members != members:
        raise ValueError(f"{members} members but per-member settings for "
                         f"{per_member.members}")
    lrs = torch.tensor(per_member.lr, dtype=torch.float64, device=device)
    decay = None if per_member.weight_decay is None else torch.tensor(
        per_member.weight_decay, dtype=torch.float64, device=device)
    hyper = {}
    for name, values in per_member.hyper.items():
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            raise ValueError(f"hyperparameter {name!r}: only numbers differ between the "
                             f"members of one run, got {values!r} (run each choice apart)")
        kind = torch.int64 if all(isinstance(v, int) for v in values) else torch.float64
        hyper[name] = torch.tensor(values, dtype=kind, device=device)
    return lrs, decay, hyper


def with_state(hook: LossFn, *args: object, state: Tensor, index: Tensor,
               **context: object) -> Tensor:
    """``hook(*args, state=state[index], **context)``, and what the hook wrote into its
    slice stored back: a hook sees the per-sample memory of its own batch only, never the
    samples' indices."""
    if "state" not in getattr(hook, "context", ("state",)):
        return hook(*args, **context)
    part = state[index]
    out = hook(*args, state=part, **context)
    with torch.no_grad():
        state[index] = part
    return out


def each_member(hook: Callable[..., Tensor], *args: Tensor,
                hyper: Mapping[str, Sequence[Any]] | None = None, **context: Any) -> Tensor:
    """A post-hoc hook (fit on validation outputs, applied to test outputs) on each member's
    slice of the member-stacked ``args`` ``[M, ...]``, its outputs stacked. A hook served
    from the sandbox (:mod:`harness.sandbox.remote`) sends member ``m``'s slice to member ``m``'s
    server; here it is a loop, so the hook may optimise with autograd inside. ``hyper``:
    each member's own hyperparameter values, ``{name: [M values]}`` (a tuned run's trials;
    a server binds its own at load, so a served hook takes none)."""
    batched = getattr(hook, "each_member", None)
    if batched is not None:
        if hyper:
            raise ValueError("a served hook binds its hyperparameters at load")
        return batched(*args, **context)
    outs = []
    for m in range(args[0].shape[0]):
        own = {"hyper": {k: v[m] for k, v in hyper.items()}} if hyper else {}
        try:
            out = hook(*(a[m] for a in args), **own, **{
                k: v[m] if isinstance(v, Tensor) else v for k, v in context.items()})
        except Exception as exc:  # the objective's own failure: a failed cell, not a crash
            raise ObjectiveRuntimeError(_describe(exc)) from exc
        if not isinstance(out, Tensor):
            raise ObjectiveRuntimeError(f"a post-hoc hook must return a tensor, got "
                                        f"{type(out).__name__}")
        outs.append(out)
    shapes = {(tuple(o.shape), o.dtype) for o in outs}
    if len(shapes) > 1:
        raise ObjectiveRuntimeError(f"a post-hoc hook returned outputs of different shapes "
                                    f"or dtypes for different members: {sorted(map(str, shapes))}")
    return torch.stack(outs)


def reduce_loss(out: Tensor) -> Tensor:
    """Per-sample losses [B] are averaged; a scalar is used as it is; nothing else is a loss."""
    if not isinstance(out, Tensor):
        raise TypeError(f"the loss must return a tensor, got {type(out).__name__}")
    if out.dim() > 1:
        raise ValueError(f"the loss must be a scalar or per-sample [B], got shape "
                         f"{tuple(out.shape)}")
    return out.mean() if out.dim() > 0 else out


NO_GRADIENT = ("the loss has no gradient: it does not depend on the model's outputs through "
               "operations autograd can differentiate (detached, or computed outside torch?)")


def _backward(total: Tensor) -> None:
    """Gradients of the members' summed loss; what the objective's graph makes backward
    raise is the objective's failure, not the trainer's."""
    if not total.requires_grad:
        raise ObjectiveRuntimeError(NO_GRADIENT)
    try:
        total.backward()
    except Exception as exc:
        raise ObjectiveRuntimeError(_describe(exc)) from exc


def _vmapped_step(member_loss: MemberLoss) -> Callable[..., Tensor]:
    def reduced(p, batch, state, progress):
        return reduce_loss(member_loss(p, batch, state, progress))

    return vmap(reduced, in_dims=(0, 0, 0, None))


def _loop_step(member_loss: MemberLoss, params, batch, state, progress) -> Tensor:
    losses = []
    for m in range(state.shape[0]):
        p = {k: v[m] for k, v in params.items()}
        one = tree_map(lambda t, m=m: t[m], batch)
        losses.append(reduce_loss(member_loss(p, one, state[m], progress)))
    return torch.stack(losses)


def _batch_len(batch: Batch) -> int:
    """Samples per member in this step (of the first sampler, for paired batches)."""
    index = batch.get("index")
    if isinstance(index, Tensor):
        return index.shape[1]
    return _batch_len(next(v for v in batch.values() if isinstance(v, dict)))


def _stored(p: Tensor, layout: str) -> Tensor:
    """A private copy of a stacked parameter; with ``columns``, each member's matrix
    (a 3-D ``[M, out, in]`` tensor) column-major, as autograd writes its gradient."""
    if layout == "columns" and p.dim() == 3:
        return p.transpose(1, 2).contiguous().transpose(1, 2)
    return p.clone()


def _describe(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
