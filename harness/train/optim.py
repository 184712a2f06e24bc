"""Optimizers over stacked members, with per-member gradient clipping folded in.

Every tensor is ``[M, ...]`` with one member per row. SGD and Adam are elementwise, so
one update of the stacked tensors is exactly one optimizer per member; clipping scales
each member's gradient by its own coefficient ``coef[m]`` (``max_norm / (‖g_m‖ + 1e-6)``,
at most 1, as ``torch.nn.utils.clip_grad_norm_``). The arithmetic is that of
``torch.optim.SGD`` / ``Adam`` / ``AdamW`` (single-tensor path), fused into as few passes
over memory as possible, because at these model sizes the update is memory-bound.
Tested equal to ``torch.optim`` after ``clip_grad_norm_``, per member.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.train.config import Optimizer


class StackedOptimizer:
    """Optimizer state for stacked ``leaves`` (each ``[M, ...]`` with ``.grad`` set).

    ``weight_decay`` ``[M]`` gives each member its own decay (a tuned run's trials); then,
    or when :meth:`step` gets a learning rate per member (a ``[M]`` tensor), the update
    takes the per-member path: the same arithmetic with the scalars as ``[M, 1, …]``
    tensors, which rounds differently from the scalar path in the last bit."""

    def __init__(self, leaves: list[Tensor], spec: Optimizer,
                 weight_decay: Tensor | None = None):
        self.leaves, self.spec = leaves, spec
        self.member_decay = weight_decay
        self.steps = 0
        if spec.kind == "sgd":
            self.buffers = [torch.zeros_like(p) for p in leaves]  # momentum
        else:
            self.exp_avg = [torch.zeros_like(p) for p in leaves]
            self.exp_avg_sq = [torch.zeros_like(p) for p in leaves]

    @torch.no_grad()
    def step(self, lr: float | Tensor, coef: Tensor) -> None:
        self.steps += 1
        if isinstance(lr, Tensor) or self.member_decay is not None:
            lr = lr if isinstance(lr, Tensor) else torch.full_like(coef, lr)
            decay = self.member_decay if self.member_decay is not None else torch.full_like(
                coef, self.spec.weight_decay)
            if self.spec.kind == "sgd":
                self._sgd_members(lr.to(coef.dtype), decay.to(coef.dtype), coef)
            else:
                self._adam_members(lr.to(coef.dtype), decay.to(coef.dtype), coef)
        elif self.spec.kind == "sgd":
            self._sgd(lr, coef)
        else:
            self._adam(lr, coef)

    @torch.no_grad()
    def zero_members(self, dead: Tensor) -> None:
        """Freeze diverged members at zero, state included, so their NaNs reach nothing."""
        state = self.buffers if self.spec.kind == "sgd" else self.exp_avg + self.exp_avg_sq
        for t in (*self.leaves, *state):
            t[dead] = 0.0

    def _sgd(self, lr: float, coef: Tensor) -> None:
        # buf = momentum·buf + clipped grad + wd·p; p -= lr·buf: two passes per tensor.
        s = self.spec
        for leaf, buf in zip(self.leaves, self.buffers, strict=True):
            c = _per_member(coef, leaf)
            grad = leaf.grad
            if s.weight_decay:
                grad = grad * c + s.weight_decay * leaf
                c = torch.ones_like(c)
            buf.mul_(s.momentum).addcmul_(grad, c)
            if s.nesterov:
                leaf.sub_(lr * (grad * c + s.momentum * buf))
            else:
                leaf.sub_(buf, alpha=lr)

    def _adam(self, lr: float, coef: Tensor) -> None:
        s = self.spec
        beta1, beta2 = s.betas
        bias_correction1 = 1 - beta1 ** self.steps
        bias_correction2_sqrt = (1 - beta2 ** self.steps) ** 0.5
        step_size = lr / bias_correction1
        for leaf, m, v in zip(self.leaves, self.exp_avg, self.exp_avg_sq, strict=True):
            grad = leaf.grad * _per_member(coef, leaf)
            if s.weight_decay:
                if s.kind == "adamw":
                    leaf.mul_(1 - lr * s.weight_decay)
                else:
                    grad = grad.add(leaf, alpha=s.weight_decay)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(s.eps)
            leaf.addcdiv_(m, denom, value=-step_size)


    def _sgd_members(self, lr: Tensor, decay: Tensor, coef: Tensor) -> None:
        """:meth:`_sgd` with a learning rate and a weight decay per member."""
        s = self.spec
        for leaf, buf in zip(self.leaves, self.buffers, strict=True):
            c, rate = _per_member(coef, leaf), _per_member(lr, leaf)
            grad = leaf.grad * c + _per_member(decay, leaf) * leaf
            buf.mul_(s.momentum).add_(grad)
            if s.nesterov:
                leaf.sub_((grad + s.momentum * buf) * rate)
            else:
                leaf.sub_(buf * rate)

    def _adam_members(self, lr: Tensor, decay: Tensor, coef: Tensor) -> None:
        """:meth:`_adam` with a learning rate and a weight decay per member."""
        s = self.spec
        beta1, beta2 = s.betas
        bias_correction1 = 1 - beta1 ** self.steps
        bias_correction2_sqrt = (1 - beta2 ** self.steps) ** 0.5
        for leaf, m, v in zip(self.leaves, self.exp_avg, self.exp_avg_sq, strict=True):
            rate, wd = _per_member(lr, leaf), _per_member(decay, leaf)
            grad = leaf.grad * _per_member(coef, leaf)
            if s.kind == "adamw":
                leaf.mul_(1 - rate * wd)
            else:
                grad = grad + wd * leaf
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(s.eps)
            leaf.sub_(m / denom * (rate / bias_correction1))


def _per_member(coef: Tensor, like: Tensor) -> Tensor:
    return coef.view(-1, *[1] * (like.dim() - 1))


@torch.no_grad()
def grad_norms(leaves: list[Tensor], alive: Tensor) -> Tensor:
    """Per-member gradient norms [M]; diverged members' gradients are zeroed first."""
    if not bool(alive.all()):
        for leaf in leaves:
            leaf.grad[~alive] = 0.0
    sq = sum(torch.linalg.vector_norm(_flat(leaf.grad), dim=1).square() for leaf in leaves)
    return sq.sqrt()


def _flat(grad: Tensor) -> Tensor:
    """``[M, -1]`` without a copy: a column-major matrix (the ``columns`` weight layout) is
    read in its own memory order."""
    if grad.dim() == 3 and grad.stride(1) == 1 and not grad.is_contiguous():
        grad = grad.transpose(1, 2)
    return grad.flatten(1)


def clip_coefficients(norms: Tensor, max_norm: float | None) -> Tensor:
    """Per-member scale that brings each gradient norm down to ``max_norm``."""
    if max_norm is None:
        return torch.ones_like(norms)
    return (max_norm / (norms + 1e-6)).clamp(max=1.0)
