"""The validator's smoke test for ``certified_loss``: small, fixed inputs shaped as the suite
gives them (logits, IBP worst-case logits, every context name), at the ramp's ends."""

from __future__ import annotations

from typing import Any

from harness.objectives.loading import LoadedObjective
from harness.objectives.validate import (
    BATCH,
    CLASSES,
    ORDINARY,
    Problem,
    SmokeCase,
    check_loss_hook,
)

WIDTHS = (64, 128, 128, CLASSES)  # the digits network: input, hidden, hidden, logits


def check_certified_loss(objective: LoadedObjective, hook: str) -> list[Problem]:
    return check_loss_hook(objective, hook, certified_cases(objective.wants(hook, "progress")),
                           batch=BATCH, inputs="its inputs (logits, worst_logits, context)")


def certified_cases(wants_progress: bool) -> list[SmokeCase]:
    """Mid-ramp (ε_t = ε_max/2), the warm-up (ε_t = 0, worst case = clean), confident and
    all-zero logits, and the ends of training when the hook reads ``progress``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    base = torch.randn(BATCH, CLASSES, generator=gen)
    targets = torch.randint(CLASSES, (BATCH,), generator=gen)
    x = torch.rand(BATCH, WIDTHS[0], generator=gen)
    hidden = [torch.randn(BATCH, w, generator=gen) for w in WIDTHS[1:-1]]

    def worst(logits: Any, slack: float) -> Any:
        """Lower bounds for the true class, upper bounds for the others."""
        up = logits + slack
        return up.scatter(1, targets[:, None], logits.gather(1, targets[:, None]) - slack)

    def case(name: str, logits: Any, eps: float, progress: float = 0.5) -> SmokeCase:
        slack = 4.0 * eps
        layer_bounds = [(x - eps, x + eps)] + [(h - slack, h + slack) for h in hidden] + [
            (logits - slack, logits + slack)]
        return SmokeCase(name, (logits, worst(logits, slack), targets), {
            "progress": progress,
            "state": torch.full((BATCH,), float("nan")), "eps": eps, "eps_max": 0.11,
            "crown_ibp_worst_logits": lambda: worst(logits, slack / 2),
            "bounds": layer_bounds, "adv_logits": logits - 0.5 * slack})

    cases = [case(ORDINARY, base, 0.055), case("the warm-up (eps = 0)", base, 0.0, 0.01),
             case("confident logits (30 × randn)", 30 * base, 0.055),
             case("all-zero logits", torch.zeros_like(base), 0.055)]
    if wants_progress:
        cases += [case("progress=0.0", base, 0.0, 0.0), case("progress=1.0", base, 0.11, 1.0)]
    return cases
