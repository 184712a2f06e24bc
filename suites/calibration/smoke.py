"""The validator's smoke test for ``posthoc_calibration``: not a loss, so its own check."""

from __future__ import annotations

from harness.objectives.loading import LoadedObjective
from harness.objectives.validate import Problem, call_for_tensor

CLASSES, VAL, TEST = 5, 64, 16


def check_posthoc_calibration(objective: LoadedObjective, hook: str) -> list[Problem]:
    """It must map test logits to probabilities: ``[M, K]``, finite, in [0, 1], rows
    summing to 1; on ordinary, very confident and single-row test logits."""
    import torch

    from suites.calibration.probabilities import problem

    gen = torch.Generator().manual_seed(0)
    val = torch.randn(VAL, CLASSES, generator=gen) * 3
    targets = torch.randint(0, CLASSES, (VAL,), generator=gen)
    test = torch.randn(TEST, CLASSES, generator=gen) * 3
    cases = [("ordinary logits", val, test), ("very confident logits (× 30)", val * 30, test * 30),
             ("a single test row", val, test[:1])]
    fn = objective.bind(hook)
    for name, v, t in cases:
        out, problems = call_for_tensor(fn, hook, name, "test probabilities", v.clone(),
                                        targets.clone(), t.clone())  # it may use autograd
        if problems:
            return problems
        why = problem(out.detach().cpu().numpy(), (len(t), CLASSES))
        if why:
            code = "shape" if "shape" in why else "non-finite" if "finite" in why else "range"
            return [Problem(code, "error", f"{hook} {why} ({name})")]
    return []
