"""The validator's smoke tests for the fake suite's two hooks."""

from __future__ import annotations

from harness.objectives.loading import LoadedObjective
from harness.objectives.validate import ORDINARY, Problem, SmokeCase, check_loss_hook

BATCH = 8


def check_regression_loss(objective: LoadedObjective, hook: str) -> list[Problem]:
    import torch

    gen = torch.Generator().manual_seed(0)
    pred, target = torch.randn(BATCH, generator=gen), torch.randn(BATCH, generator=gen)
    cases = [SmokeCase(ORDINARY, (pred, target), {"progress": 0.5}),
             SmokeCase("far outliers (targets × 1000)", (pred, 1000 * target), {"progress": 0.5}),
             SmokeCase("exact predictions", (target.clone(), target), {"progress": 0.5})]
    return check_loss_hook(objective, hook, cases, batch=BATCH, inputs="the predictions")


def check_posthoc_shift(objective: LoadedObjective, hook: str) -> list[Problem]:
    """Not a loss: it must return finite adjusted predictions shaped like ``test_pred``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    val_pred, val_target = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    test_pred = torch.randn(BATCH, generator=gen)
    try:
        out = objective.bind(hook)(val_pred, val_target, test_pred)
    except Exception as exc:
        return [Problem("exception", "error", f"{hook} raised {type(exc).__name__}: {exc}")]
    if not isinstance(out, torch.Tensor) or out.shape != test_pred.shape:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return [Problem("shape", "error", f"{hook} returned {shape}; it must return adjusted "
                        f"test predictions of shape [{BATCH}], like test_pred")]
    if not bool(torch.isfinite(out).all()):
        return [Problem("non-finite", "error", f"{hook} returned non-finite predictions")]
    return []
