"""PGD: the trusted evaluation attack (batched over members) and the training attack.

Evaluation (see this suite's README): margin loss ``max_{j≠y} z_j − z_y``, 100 steps of
size 0.25·ε (per input dimension: 0.25 × the box radius), ×0.1 at 50 %, 80 % and 90 %
of the steps, 5 restarts from uniform random points of the box, projection by
clamping to the box (the ε-ball intersected with the valid input range). A sample
counts as broken if *any* evaluated point (the clean input or any iterate of any
restart) is misclassified, as with CTBench's per-sample early stop: a sample that every
member misclassifies at some point is attacked no further (its random starts are still
drawn, so the others' stay the same). That changes no verdict, since each sample's
iterates depend on its own gradient alone, and is 2–3× faster on a model PGD breaks
often (bench/pgd.py).

Training (``adv_logits`` context): Madry et al.'s PGD on cross-entropy, K steps of
2.5·ε/K from a uniform random start. Random ops cannot run under ``vmap``, so the start
comes from a counter-based hash of (sample index, step), deterministic per member.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap


@dataclass(frozen=True)
class PGDConfig:
    steps: int = 100
    restarts: int = 5
    step_size: float = 0.25  # × the box radius
    decay_at: tuple[float, ...] = (0.5, 0.8, 0.9)  # fractions of the steps
    decay: float = 0.1

    def alpha(self, t: int) -> float:
        """Step size multiplier (of the radius) at step ``t``."""
        drops = sum(t >= f * self.steps for f in self.decay_at)
        return self.step_size * self.decay ** drops


@dataclass
class AttackResult:
    broken: Tensor  # [M, N] bool: some evaluated point is misclassified
    min_margins: Tensor  # [M, N, K] smallest z_y − z_j over the points evaluated
    points: int  # points evaluated per sample, at most (early stop: fewer once broken)


def margin_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """``max_{j≠y} z_j − z_y`` per sample (positive ⇔ misclassified, up to ties)."""
    z_y = logits.gather(-1, targets[..., None]).squeeze(-1)
    other = logits.masked_fill(_one_hot(targets, logits), float("-inf"))
    return other.max(-1).values - z_y


@torch.no_grad()
def pgd_evaluate(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor,
                 lower: Tensor, upper: Tensor, radius: Tensor | float,
                 generators: list[torch.Generator], config: PGDConfig = PGDConfig(),
                 chunk: int = 1024, early_stop: bool = True) -> AttackResult:
    """PGD against every member of stacked ``params`` ([M, ...]) on shared inputs.

    ``lower``/``upper`` [N, ...] are the box, ``radius`` the ε-ball radius (a float, or a
    tensor broadcasting to one input, e.g. ε/σ_c per channel); ``generators[m]`` draws
    member m's random starts, so a member's result does not depend on its batch-mates.
    ``early_stop=False`` attacks every sample to the end (the same ``broken``; the bench's
    baseline).
    """
    forward = vmap(lambda p, xs: functional_call(model, p, (xs,)), in_dims=(0, 0))
    members = next(iter(params.values())).shape[0]
    broken, mins = [], []
    for i in range(0, len(x), chunk):
        xc, yc, lo, hi = x[i:i + chunk], y[i:i + chunk], lower[i:i + chunk], upper[i:i + chunk]
        yb = yc.expand(members, -1)
        clean = forward(params, xc.expand(members, *xc.shape))
        b = clean.argmax(-1) != yb
        m = _margins(clean, yb)
        for _ in range(config.restarts):
            u = torch.stack([torch.rand(xc.shape, generator=g) for g in generators]).to(x.device)
            live = torch.arange(len(xc), device=x.device)  # the samples still attacked
            if early_stop:
                live = live[~b.all(0)]
            ys, los, his = yb[:, live], lo[live], hi[live]
            xa = los + (his - los) * u[:, live]
            for t in range(config.steps + 1):
                if len(live) == 0:
                    break
                with torch.enable_grad():
                    xa.requires_grad_(True)
                    logits = forward(params, xa)
                    if t < config.steps:
                        (grad,) = torch.autograd.grad(margin_loss(logits, ys).sum(), xa)
                logits = logits.detach()
                b[:, live] |= logits.argmax(-1) != ys
                m[:, live] = torch.minimum(m[:, live], _margins(logits, ys))
                if t < config.steps:
                    step = config.alpha(t) * radius
                    xa = torch.minimum(torch.maximum(xa.detach() + step * grad.sign(), los),
                                       his)
                    if early_stop and bool((done := b[:, live].all(0)).any()):
                        keep = ~done  # every member has misclassified these: stop
                        live, xa = live[keep], xa[:, keep]
                        ys, los, his = yb[:, live], lo[live], hi[live]
        broken.append(b)
        mins.append(m)
    return AttackResult(torch.cat(broken, 1), torch.cat(mins, 1),
                        1 + config.restarts * (config.steps + 1))


def pgd_train_inputs(forward: Callable[[Tensor], Tensor], x: Tensor, y: Tensor, lower: Tensor,
                     upper: Tensor, radius: Tensor | float, index: Tensor, salt: int,
                     steps: int = 10) -> Tensor:
    """Madry PGD on CE for ONE member (vmappable): adversarial inputs, detached."""
    if steps <= 0:
        return x.detach()
    alpha = 2.5 / steps * radius
    xa = (lower + (upper - lower) * hash_uniform(index, salt, x.shape[1:])).detach()
    lower, upper = lower.detach(), upper.detach()

    def loss(inputs: Tensor) -> Tensor:
        return nn.functional.cross_entropy(forward(inputs), y, reduction="sum")

    for _ in range(steps):
        grad = torch.func.grad(loss)(xa)
        xa = torch.minimum(torch.maximum(xa + alpha * grad.sign(), lower), upper).detach()
    return xa


def hash_uniform(index: Tensor, salt: int, shape: tuple[int, ...] | torch.Size) -> Tensor:
    """Uniform [0, 1) numbers [B, *shape] from a 32-bit integer hash of (index, element, salt).

    A counter-based generator: no RNG state, so it runs under ``vmap``; int64 products
    may wrap, which keeps the low 32 bits exact.
    """
    size = 1
    for s in shape:
        size *= int(s)
    k = index[:, None] * size + torch.arange(size, device=index.device)
    mask = 0xFFFFFFFF
    h = (k * 0x9E3779B1 + (salt & mask)) & mask
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & mask
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & mask
    h = (h ^ (h >> 16)) >> 8  # 24 bits: exact in float32, so the result stays below 1
    return (h.to(torch.float32) / 2.0**24).reshape(index.shape[0], *shape)


def _margins(logits: Tensor, targets: Tensor) -> Tensor:
    return logits.gather(-1, targets[..., None]) - logits


def _one_hot(targets: Tensor, logits: Tensor) -> Tensor:
    return torch.nn.functional.one_hot(targets, logits.shape[-1]).bool()
