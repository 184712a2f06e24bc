"""The ε and κ schedules of certified training, as functions of ``progress`` (torch-free).

``progress`` is the fraction of training done (``step / total_steps``), the same
number the hooks receive. This suite's protocol: a natural warm-up at ε = 0, a linear ε
ramp to ε_train, then ε_train until the end. The IBP loss weight κ follows the ramp:
κ = 1 − (1 − κ_final)·ε_t/ε_train, i.e. 1 during the warm-up, then linearly to
κ_final when ε reaches ε_train (Gowal et al.'s nominal/verified weights 1→0.5 and
0→0.5 are the two halves of this with κ_final = 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    eps_max: float  # ε_train, in pixel units
    warmup: float = 0.05  # fraction of training at ε = 0 (5 of 100 epochs)
    ramp: float = 0.45  # fraction over which ε grows linearly (45 of 100 epochs)

    def eps(self, progress: float) -> float:
        """ε_t: 0 during the warm-up, linear to ``eps_max`` over the ramp, then constant."""
        if progress <= self.warmup:
            return 0.0
        if self.ramp <= 0 or progress >= self.warmup + self.ramp:
            return self.eps_max
        return self.eps_max * (progress - self.warmup) / self.ramp

    def kappa(self, progress: float, final: float = 0.5) -> float:
        """Weight of the natural loss: 1 → ``final`` as ε_t ramps (1 while ε_t = 0)."""
        return mixing_weight(self.eps(progress), self.eps_max, final)


def mixing_weight(eps: float, eps_max: float, final: float) -> float:
    """``1 − (1 − final)·eps/eps_max``: CROWN-IBP's κ and β schedules (and IBP's κ)."""
    if eps_max <= 0:
        return 1.0
    return 1.0 - (1.0 - final) * min(eps / eps_max, 1.0)
