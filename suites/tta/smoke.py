"""The validator's smoke tests for the two test-time hooks.

``tta_loss`` is loss-like: the engine's :func:`check_loss_hook` runs it on a few batches of
logits with the context the suite offers (a fresh and a written ``memory``, parameters a
little away from the source's) and then seed-batched under vmap. ``tta_adjust`` returns
probabilities: each case's output must be ``[B, K]``, finite, in [0, 1], rows summing
to 1, including a batch of one sample. Both check the objective's ``MODEL`` step options.
"""

from __future__ import annotations

from harness.objectives.loading import LoadedObjective
from harness.objectives.validate import Problem, SmokeCase, call_for_tensor, check_loss_hook

CLASSES, FEATURES, PARAMS, BATCH = 10, 32, 48, 16


def _model_problem(objective: LoadedObjective) -> list[Problem]:
    from suites.tta.adapt import options
    try:
        options(objective.model)
    except ValueError as exc:
        return [Problem("model", "error", str(exc))]
    return []


def check_tta_loss(objective: LoadedObjective, hook: str) -> list[Problem]:
    """The loss on ordinary (3 × randn), confident and all-zero logits, with a fresh and a
    written memory, at both ends of the stream when it reads ``progress``."""
    import torch

    from suites.tta import MEMORY

    problems = _model_problem(objective)
    if problems:
        return problems
    gen = torch.Generator().manual_seed(0)
    base = 3 * torch.randn(BATCH, CLASSES, generator=gen)
    features = torch.relu(torch.randn(BATCH, FEATURES, generator=gen))
    params = torch.randn(PARAMS, generator=gen)
    source = params + 0.1 * torch.randn(PARAMS, generator=gen)
    fisher = torch.rand(PARAMS, generator=gen)
    fresh = torch.full((MEMORY,), float("nan"))
    written = fresh.clone()
    written[:CLASSES] = torch.softmax(base, -1).mean(0)

    def case(name: str, logits: torch.Tensor, memory: torch.Tensor = fresh,
             progress: float = 0.5) -> SmokeCase:
        return SmokeCase(name, (logits,), {
            "features": features, "progress": progress, "memory": memory, "params": params,
            "source_params": source, "fisher": fisher},
            constant=("memory", "source_params", "fisher"))

    cases = [case("ordinary logits (3 × randn), fresh memory", base),
             case("memory written by an earlier batch", base, written),
             case("confident logits (30 × randn)", 10 * base),
             case("all-zero logits", torch.zeros_like(base))]
    if objective.wants(hook, "progress"):
        cases += [case("progress=0.0", base, progress=0.0),
                  case("progress=1.0", base, progress=1.0)]
    return check_loss_hook(objective, hook, cases, batch=BATCH, inputs="the logits")


def check_tta_adjust(objective: LoadedObjective, hook: str) -> list[Problem]:
    """Probabilities out for ordinary, confident, 4-sample and 1-sample batches."""
    import torch

    from suites.tta.pipeline import problem

    problems = _model_problem(objective)
    if problems:
        return problems
    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(BATCH, CLASSES, generator=gen)
    features = torch.relu(torch.randn(BATCH, FEATURES, generator=gen))
    cases = [("an ordinary batch", logits, features),
             ("confident logits (30 × randn)", 10 * logits, features),
             ("a batch of 4", logits[:4], features[:4]),
             ("a batch of one sample", logits[:1], features[:1])]
    fn = objective.bind(hook)
    for name, z, f in cases:
        probs = torch.softmax(z, -1)
        out, problems = call_for_tensor(fn, hook, name, "probabilities", probs.clone(),
                                        f.clone(), progress=0.5)
        if problems:
            return problems
        if tuple(out.shape) != tuple(probs.shape):
            return [Problem("shape", "error", f"{hook} returned shape {list(out.shape)}, not "
                            f"the batch's {list(probs.shape)} ({name})")]
        why = problem(out.detach().double().cpu().numpy(), [(0, len(z))])
        if why:
            code = "non-finite" if "finite" in why else "range"
            return [Problem(code, "error", f"{hook} {why.replace(' at batch 0', '')} ({name})")]
    return []
