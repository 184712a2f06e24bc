"""Online adaptation of every seed's source model along its stream, all seeds at once.

The trusted side of the suite: it holds the models, the stream and the optimizer, and
calls the objective's hooks. Per batch, for every member (seed):

1. reset the member to its source model if the stream says so (a new domain) — its
   parameters, its optimizer state, its ``memory`` and its loss EMA;
2. forward the batch (test-batch BatchNorm statistics, or the source's running ones when
   the objective declares ``MODEL = {"normalization": "source"}``); the prediction counted
   is this one, made before the batch's update: ``softmax(logits)``, adjusted by
   ``tta_adjust`` when the objective defines it;
3. with a ``tta_loss``: its gradient with respect to the BatchNorm affine parameters, one
   Adam step (the suite's lr, betas and eps; bias correction per member). A member whose
   gradient is exactly zero (nothing selected) takes no step on that batch. With
   ``MODEL["sharpness"] = ρ`` the step is sharpness-aware (SAM): the hook is called again
   at ``θ + ρ·g/‖g‖`` on the same batch and that gradient is applied at ``θ``. With
   ``MODEL["reset_below"] = t`` the member goes back to its source model whenever the EMA
   (``reset_ema``) of its loss falls below ``t`` (SAR's model recovery).

A loss that cannot be vmapped falls back to a loop over members (``mode="auto"``), as the
general trainer does. A non-finite loss freezes that member (its batch index is recorded:
the judge fails it, or marks it diverged).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.func import vmap

from harness.contract.pipeline import InvalidOutput
from harness.train import ObjectiveRuntimeError, PerMember, reduce_loss
from harness.train.loop import _describe
from suites.tta import model as m

LOSS, ADJUST = "tta_loss", "tta_adjust"
OPTIONS = {"normalization": str, "sharpness": (int, float), "reset_below": (int, float)}


@dataclass(frozen=True)
class Options:
    """How the suite steps for an objective (its declared ``MODEL``)."""

    normalization: str = "batch"
    sharpness: float = 0.0
    reset_below: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"normalization": self.normalization, "sharpness": self.sharpness,
                "reset_below": self.reset_below}


def options(declared: Any) -> Options:
    """The objective's ``MODEL`` dict, checked: unknown keys or bad values are an error
    naming them (a typo must not silently change the protocol)."""
    if declared is None:
        declared = {}
    if not isinstance(declared, Mapping):
        raise ValueError(f"MODEL must be a dict of step options "
                         f"({', '.join(OPTIONS)}), got {type(declared).__name__}")
    for key, value in declared.items():
        if key not in OPTIONS:
            raise ValueError(f"MODEL[{key!r}] is not an option of this suite (options: "
                             f"{', '.join(OPTIONS)})")
        if isinstance(value, bool) or not isinstance(value, OPTIONS[key]):
            raise ValueError(f"MODEL[{key!r}] = {value!r} has the wrong type")
    out = Options(**dict(declared))
    if out.normalization not in ("batch", "source"):
        raise ValueError(f"MODEL['normalization'] must be 'batch' or 'source', "
                         f"got {out.normalization!r}")
    if not (math.isfinite(out.sharpness) and out.sharpness >= 0):
        raise ValueError(f"MODEL['sharpness'] must be a finite number ≥ 0, got {out.sharpness}")
    if out.reset_below is not None and not math.isfinite(out.reset_below):
        raise ValueError("MODEL['reset_below'] must be finite")
    return out


@dataclass
class Adapted:
    """What adaptation returns to the pipeline (predictions, never a metric)."""

    probs: Tensor  # [M, T, K] the prediction counted for every stream sample
    clean_probs: Tensor  # [M, N, K] on the clean pool after the stream
    diverged: list[int]  # per member: batch with the first non-finite loss, or -1
    resets: list[int]  # per member: resets by the objective's rule
    updated: list[int]  # per member: batches with an optimizer step
    mode: str
    fallback_reason: str
    wall_time: float


class Adapter:
    """One job's members adapting along their streams (see the module docstring)."""

    def __init__(self, architecture: str, source: Mapping[str, Tensor], hooks: Mapping[str, Any],
                 opts: Options, settings: Mapping[str, Any], *, mode: str = "auto",
                 fisher_x: Tensor | None = None, batch_size: int = 64,
                 per_member: PerMember | None = None) -> None:
        self.arch, self.opts, self.mode = architecture, opts, mode
        self.loss, self.adjust = hooks.get(LOSS), hooks.get(ADJUST)
        self.source = {k: v.clone() for k, v in source.items()}
        self.names = m.affine_names(architecture)
        self.members = next(iter(source.values())).shape[0]
        # a tuned search's trials: a learning rate [M] and hyperparameter values per member
        self.lr: float | Tensor = float(settings["lr"])
        self.hyper: dict[str, Any] = {}
        self.vmapped = mode != "loop"
        self.fallback_reason = ""
        if per_member is not None:
            self._per_member(per_member)
        self.betas = tuple(float(b) for b in settings["betas"])
        self.eps = float(settings["adam_eps"])
        self.ema_decay = float(settings["reset_ema"])
        self.memory_size = int(settings["memory"])
        self.wanted = set(getattr(self.loss, "context", ()) or ())
        self.fisher = (self._fisher(fisher_x, batch_size) if self.loss is not None
                       and "fisher" in self.wanted and fisher_x is not None else None)
        self.params = {k: v.clone() for k, v in self.source.items()}
        self._fresh(torch.ones(self.members, dtype=torch.bool))

    def _per_member(self, per_member: PerMember) -> None:
        """Numbers become tensors ``[M]`` the vmapped loss slices; a non-number (LAME's
        kernel) differing between members makes the loss a loop over them."""
        if per_member.members != self.members:
            raise ValueError(f"{self.members} members but per-member settings for "
                             f"{per_member.members}")
        self.lr = torch.tensor(per_member.lr, dtype=torch.float32)
        for name, values in per_member.hyper.items():
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                kind = torch.int64 if all(isinstance(v, int) for v in values) else torch.float64
                self.hyper[name] = torch.tensor(values, dtype=kind)
            else:
                self.hyper[name] = list(values)
                self.vmapped = False
                self.fallback_reason = f"members differ in {name}, which is not a number"

    def _own(self, i: int) -> dict[str, Any]:
        """Member ``i``'s hyperparameter values (``{}`` when members share the loaded ones)."""
        return {k: v[i] for k, v in self.hyper.items()}

    # --- state ---

    def _fresh(self, who: Tensor) -> None:
        """Members ``who`` back to their source model, with fresh optimizer state."""
        if not hasattr(self, "exp_avg"):
            self.exp_avg = {n: torch.zeros_like(self.source[n]) for n in self.names}
            self.exp_avg_sq = {n: torch.zeros_like(self.source[n]) for n in self.names}
            self.steps = torch.zeros(self.members)
            self.memory = torch.full((self.members, self.memory_size), float("nan"))
            self.ema = torch.full((self.members,), float("nan"))
        with torch.no_grad():
            for n in self.params:
                self.params[n][who] = self.source[n][who]
            for n in self.names:
                self.exp_avg[n][who] = 0.0
                self.exp_avg_sq[n][who] = 0.0
            self.steps[who] = 0.0
            self.memory[who] = float("nan")
            self.ema[who] = float("nan")

    # --- one batch ---

    def forward(self, params: Mapping[str, Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
        norm = self.opts.normalization
        return vmap(lambda p, xb: m.forward(self.arch, p, xb, normalization=norm))(params, x)

    def predict(self, logits: Tensor, features: Tensor, progress: float) -> Tensor:
        """The prediction counted: softmax, adjusted by ``tta_adjust`` if defined."""
        probs = torch.softmax(logits.detach(), dim=-1)
        if self.adjust is None:
            return probs
        from harness.train import each_member

        out = each_member(self.adjust, probs, features.detach(), progress=progress,
                          hyper=self.hyper)
        if not isinstance(out, Tensor) or tuple(out.shape) != tuple(probs.shape):
            got = tuple(out.shape[1:]) if isinstance(out, Tensor) else type(out).__name__
            message = (f"{ADJUST} must return probabilities of the batch's shape "
                       f"{tuple(probs.shape[1:])}, got {got}")
            raise ObjectiveRuntimeError(message) from InvalidOutput(message)
        return out.detach().to(probs.dtype)

    def losses(self, logits: Tensor, features: Tensor, params: Mapping[str, Tensor],
               progress: float) -> Tensor:
        """Every member's reduced ``tta_loss`` ``[M]`` (vmapped, or a loop on fallback)."""
        context = {"features": features, "memory": self.memory,
                   "params": m.flat(params, self.names),
                   "source_params": m.flat(self.source, self.names)}
        if self.fisher is not None:
            context["fisher"] = self.fisher
        context = {k: v for k, v in context.items() if k in self.wanted}
        names = list(context)
        hook = self.loss

        def one(z: Tensor, own: Mapping[str, Any], *values: Tensor) -> Tensor:
            ctx = dict(zip(names, values, strict=True))
            if "progress" in self.wanted:
                ctx["progress"] = progress
            return reduce_loss(hook(z, **ctx, **({"hyper": own} if own else {})))

        if self.vmapped:
            snapshot = self.memory.clone() if self.mode == "auto" else None
            try:
                return vmap(one)(logits, self.hyper, *context.values())
            except Exception as exc:
                if snapshot is None:
                    raise ObjectiveRuntimeError(_describe(exc)) from exc
                self.memory.copy_(snapshot)
                self.vmapped, self.fallback_reason = False, _describe(exc)
        try:
            return torch.stack([one(logits[i], self._own(i), *(v[i] for v in context.values()))
                                for i in range(self.members)])
        except Exception as exc:
            raise ObjectiveRuntimeError(_describe(exc)) from exc

    def step(self, x: Tensor, progress: float, alive: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(prediction [M, B, K], per-member losses [M] (NaN without a loss), stepped [M])."""
        adapted = [self.params[n] for n in self.names]
        for p in adapted:
            p.requires_grad_(self.loss is not None)
        logits, features = self.forward(self.params, x)
        probs = self.predict(logits, features, progress)
        nothing = torch.zeros(self.members, dtype=torch.bool)
        if self.loss is None:
            return probs, torch.full((self.members,), float("nan")), nothing
        losses = self.losses(logits, features, self.params, progress)
        finite = torch.isfinite(losses.detach())
        use = alive & finite
        grads = self._grads(losses, use, adapted)
        if self.opts.sharpness > 0:
            grads, losses2 = self._sharp(x, grads, use, progress)
            use = use & torch.isfinite(losses2.detach())
            losses = losses2  # the loss at the perturbed weights: SAR's EMA follows it
        stepped = use & torch.stack([g.flatten(1).ne(0).any(1) for g in grads]).any(0)
        self._adam(grads, stepped)
        for p in adapted:
            p.requires_grad_(False)
        return probs, losses.detach(), stepped

    def _grads(self, losses: Tensor, use: Tensor, leaves: list[Tensor]) -> list[Tensor]:
        total = torch.where(use, losses, torch.zeros_like(losses)).sum()
        if not total.requires_grad:
            return [torch.zeros_like(p) for p in leaves]
        grads = torch.autograd.grad(total, leaves, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g.detach() for g, p in
                zip(grads, leaves, strict=True)]

    def _sharp(self, x: Tensor, grads: list[Tensor], use: Tensor,
               progress: float) -> tuple[list[Tensor], Tensor]:
        """SAM: the loss and its gradient at ``θ + ρ·g/‖g‖`` (per member), same batch."""
        norm = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads))
        scale = self.opts.sharpness / (norm + 1e-12)
        perturbed = dict(self.params)
        leaves = []
        for n, g in zip(self.names, grads, strict=True):
            e = g * scale.reshape(-1, *([1] * (g.dim() - 1)))
            leaf = (self.params[n].detach() + e).requires_grad_(True)
            perturbed[n] = leaf
            leaves.append(leaf)
        logits, features = self.forward(perturbed, x)
        losses = self.losses(logits, features, perturbed, progress)
        return self._grads(losses, use & torch.isfinite(losses.detach()), leaves), losses

    @torch.no_grad()
    def _adam(self, grads: list[Tensor], stepped: Tensor) -> None:
        """``torch.optim.Adam`` per member, only for members that step (own step count)."""
        b1, b2 = self.betas
        self.steps += stepped.float()
        t = self.steps.clamp_min(1)
        c1, c2 = 1 - b1 ** t, (1 - b2 ** t).sqrt()
        for n, g in zip(self.names, grads, strict=True):
            shape = (-1, *([1] * (g.dim() - 1)))
            on = stepped.reshape(shape)
            m1 = torch.where(on, self.exp_avg[n] * b1 + (1 - b1) * g, self.exp_avg[n])
            m2 = torch.where(on, self.exp_avg_sq[n] * b2 + (1 - b2) * g * g, self.exp_avg_sq[n])
            self.exp_avg[n], self.exp_avg_sq[n] = m1, m2
            update = (self.lr / c1).reshape(shape) * m1 / (m2.sqrt() / c2.reshape(shape) + self.eps)
            self.params[n] = torch.where(on, self.params[n] - update, self.params[n])

    def recover(self, losses: Tensor, alive: Tensor) -> Tensor:
        """The reset rule: members whose loss EMA fell below ``reset_below`` (reset now)."""
        if self.opts.reset_below is None:
            return torch.zeros(self.members, dtype=torch.bool)
        seen = torch.isfinite(losses) & alive
        d = self.ema_decay
        self.ema = torch.where(seen, torch.where(torch.isnan(self.ema), losses,
                                                 d * self.ema + (1 - d) * losses), self.ema)
        low = seen & (self.ema < self.opts.reset_below)
        if low.any():
            self._fresh(low)
        return low

    def _fisher(self, x: Tensor, batch_size: int) -> Tensor:
        """EATA's diagonal Fisher per member: the mean over batches of clean training
        samples of the squared gradient of ``CE(z, argmax z)`` (batch mean)."""
        out = []
        norm = self.opts.normalization
        for i in range(self.members):
            params = {k: v[i].clone() for k, v in self.source.items()}
            leaves = [params[n].requires_grad_(True) for n in self.names]
            total = [torch.zeros_like(p) for p in leaves]
            batches = 0
            for start in range(0, len(x) - 1, batch_size):
                xb = x[start:start + batch_size]
                logits, _ = m.forward(self.arch, params, xb, normalization=norm)
                loss = torch.nn.functional.cross_entropy(logits, logits.argmax(1))
                grads = torch.autograd.grad(loss, leaves)
                total = [t + g.pow(2) for t, g in zip(total, grads, strict=True)]
                batches += 1
            out.append(torch.cat([t / max(batches, 1) for t in total]))
        return torch.stack(out)


def adapt(adapter: Adapter, pool: Tensor, where: Tensor, clean: Tensor,
          batches: list[tuple[int, int]], resets: list[bool], batch_size: int,
          num_classes: int, progress_report: Callable[[float], None] | None = None) -> Adapted:
    """Run every member along its stream (``where [M, T, 2]``: row of ``pool`` per sample,
    as (domain, image)) and then over the clean pool; returns the predictions."""
    start_time = time.perf_counter()
    members, total = where.shape[0], where.shape[1]
    probs = torch.full((members, total, num_classes), float("nan"))
    alive = torch.ones(members, dtype=torch.bool)
    diverged = [-1] * members
    resets_taken, updated = torch.zeros(members, dtype=torch.long), torch.zeros(
        members, dtype=torch.long)
    every = torch.ones(members, dtype=torch.bool)
    for b, (lo, hi) in enumerate(batches):
        if resets[b]:
            adapter._fresh(every)
        idx = where[:, lo:hi]
        x = pool[idx[..., 0], idx[..., 1]]
        out, losses, stepped = adapter.step(x, b / len(batches), alive)
        probs[:, lo:hi] = out
        bad = (alive & ~torch.isfinite(losses) if adapter.loss is not None
               else torch.zeros_like(alive))
        for i in bad.nonzero().flatten().tolist():
            diverged[i] = b
        alive &= ~bad
        updated += stepped.long()
        resets_taken += adapter.recover(losses, alive).long()
        if progress_report is not None and (b + 1) % 50 == 0:
            progress_report(members * 50 / (len(batches) + 1))
    clean_probs = []
    with torch.no_grad():
        for lo in range(0, len(clean), batch_size):
            xb = clean[lo:lo + batch_size].expand(members, -1, *clean.shape[1:])
            logits, features = adapter.forward(adapter.params, xb)
            clean_probs.append(adapter.predict(logits, features, 1.0))
    return Adapted(probs, torch.cat(clean_probs, dim=1), diverged, resets_taken.tolist(),
                   updated.tolist(), "vmap" if adapter.vmapped else "loop",
                   adapter.fallback_reason, time.perf_counter() - start_time)


def as_numpy(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()
