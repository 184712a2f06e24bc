"""The fixed optimisation settings of a suite: only the objective varies.

:meth:`TrainConfig.from_settings` is the one place a suite's settings keys are read:
``epochs``, ``batch_size``, ``optimizer`` (``sgd`` | ``adam`` | ``adamw``), ``lr``,
``momentum``, ``nesterov``, ``weight_decay``, ``betas``, ``adam_eps``, ``lr_schedule``
(``cosine`` | ``constant``), ``grad_clip`` (a per-member gradient-norm bound, or None),
``weight_layout`` (``rows`` | ``columns``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("cosine", "constant")
LAYOUTS = ("rows", "columns")


@dataclass(frozen=True)
class Optimizer:
    """An elementwise optimizer, applied to every member's parameters independently.

    ``sgd`` is ``torch.optim.SGD`` (momentum, Nesterov, L2 weight decay); ``adam`` and
    ``adamw`` are ``torch.optim.Adam`` (L2 decay in the gradient) and ``AdamW`` (decoupled
    decay), without amsgrad.
    """

    kind: Literal["sgd", "adam", "adamw"] = "sgd"
    lr: float = 0.05
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.kind!r} (one of {', '.join(OPTIMIZERS)})")


@dataclass(frozen=True)
class PerMember:
    """What differs between the members of one run besides their seed: the trials of a
    tuned run (:mod:`harness.objectives.search`). ``lr`` and ``weight_decay`` are one value
    per member (None: the config's, for all); ``hyper`` the objective's hyperparameters, one
    value per member each, given to its hook as tensors (0-d under ``vmap``) in place of the
    bound defaults. A run with a ``PerMember`` takes the tensor path of the optimizer even
    where every member has the same values, so a trial's numbers do not depend on the
    trials beside it (up to where it sits in the stack: :mod:`harness.contract.chunks`)."""

    lr: tuple[float, ...]
    weight_decay: tuple[float, ...] | None = None
    hyper: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = len(self.lr)
        if m == 0 or any(not (isinstance(v, (int, float)) and v > 0) for v in self.lr):
            raise ValueError(f"per-member learning rates must be positive numbers, got "
                             f"{self.lr!r}")
        if self.weight_decay is not None and (len(self.weight_decay) != m or any(
                not isinstance(v, (int, float)) or v < 0 for v in self.weight_decay)):
            raise ValueError(f"per-member weight decay: {m} values >= 0 expected, got "
                             f"{self.weight_decay!r}")
        for name, values in self.hyper.items():
            if len(values) != m:
                raise ValueError(f"hyperparameter {name!r}: {m} values expected (one per "
                                 f"member), got {len(values)}")

    @property
    def members(self) -> int:
        return len(self.lr)


def per_member_of(plan: Mapping[str, Any]) -> PerMember | None:
    """The per-member settings a tuned run's job carries in its plan (``plan["per_member"]``:
    ``{"lr": [...], "weight_decay": [...], "hyper": {name: [...]}}``), or None."""
    raw = plan.get("per_member")
    if not raw:
        return None
    decay = raw.get("weight_decay")
    return PerMember(lr=tuple(raw["lr"]), weight_decay=None if decay is None else tuple(decay),
                     hyper={k: tuple(v) for k, v in (raw.get("hyper") or {}).items()})


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 100
    batch_size: int = 64
    optimizer: Optimizer = Optimizer()
    lr_schedule: Literal["cosine", "constant"] = "cosine"  # cosine: to 0 over all steps
    grad_clip: float | None = 5.0
    # How each member's weight matrices are stored. "columns" (column-major) lets autograd
    # write weight gradients without a transposing copy: ~1.2x per step on the digits MLP
    # (bench/seed_batching.py), but the matrix products round differently, so the per-seed
    # numbers differ from "rows" at float precision: a suite chooses one per version.
    weight_layout: Literal["rows", "columns"] = "rows"

    def __post_init__(self) -> None:
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(f"unknown lr_schedule {self.lr_schedule!r} "
                             f"(one of {', '.join(SCHEDULES)})")
        if self.weight_layout not in LAYOUTS:
            raise ValueError(f"unknown weight_layout {self.weight_layout!r} "
                             f"(one of {', '.join(LAYOUTS)})")

    def lr_at(self, step: int, total: int) -> float:
        lr = self.optimizer.lr
        if self.lr_schedule == "constant":
            return lr
        return 0.5 * lr * (1 + math.cos(math.pi * step / total))

    def schedule_at(self, step: int, total: int) -> float:
        """The schedule's factor at ``step`` (1 at the start): members with learning rates
        of their own (:class:`PerMember`) each take ``factor · lr``."""
        if self.lr_schedule == "constant":
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * step / total))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> TrainConfig:
        s = settings
        optimizer = Optimizer(
            kind=s.get("optimizer", "sgd"), lr=s["lr"], momentum=s.get("momentum", 0.0),
            nesterov=s.get("nesterov", False), weight_decay=s.get("weight_decay", 0.0),
            betas=tuple(s.get("betas", (0.9, 0.999))), eps=s.get("adam_eps", 1e-8))
        return cls(epochs=s["epochs"], batch_size=s["batch_size"], optimizer=optimizer,
                   lr_schedule=s.get("lr_schedule", "cosine"), grad_clip=s.get("grad_clip"),
                   weight_layout=s.get("weight_layout", "rows"))
