"""The validator's smoke test of ``unlearning_loss``.

The hook gets small random forget and retain batches (:class:`LMBatch`, with padding
rows), every context the suite offers, and must return a finite scalar loss with a
gradient to the model's outputs; then it runs seed-batched under vmap. Ordinary logits,
confident ones (×30, where NPO-style log-sigmoids saturate) and both ends of
``progress`` are tried. The objective's ``MODEL['hidden_layer']`` is checked too.
"""

from __future__ import annotations

from harness.objectives.loading import LoadedObjective
from harness.objectives.validate import Problem, SmokeCase, check_loss_hook

VOCAB, WIDTH, HIDDEN = 40, 7, 16
FORGET, RETAIN = 4, 6


def _batch(gen, rows: int, scale: float):
    import torch

    from suites.unlearning.batch import lm_batch

    logits = scale * torch.randn(rows, WIDTH, VOCAB, generator=gen)
    labels = torch.randint(4, VOCAB, (rows, WIDTH), generator=gen)
    mask = torch.zeros(rows, WIDTH)
    for i in range(rows):  # answers of different lengths, then padding
        mask[i, 2:WIDTH - 1 - i % 3] = 1.0
    labels = torch.where(mask > 0, labels, torch.zeros_like(labels))
    return lm_batch(logits, labels, mask)


def check_unlearning_loss(objective: LoadedObjective, hook: str) -> list[Problem]:
    import torch

    from harness.train import ObjectiveRuntimeError
    from suites.unlearning.pipeline import _hidden_layer
    from suites.unlearning.spec import MODEL, SETTINGS

    try:
        _hidden_layer(objective, int(MODEL["layers"]), int(SETTINGS["hidden_layer"]))
    except ObjectiveRuntimeError as exc:
        return [Problem("model", "error", str(exc))]
    gen = torch.Generator().manual_seed(0)
    control = torch.rand(HIDDEN, generator=gen)
    control = control / control.norm()
    constant = ("ref_forget", "ref_retain", "ref_idk", "ref_hidden_forget",
                "ref_hidden_retain", "control_vector")

    def case(name: str, scale: float, progress: float = 0.5) -> SmokeCase:
        g = torch.Generator().manual_seed(1)
        forget, retain = _batch(g, FORGET, scale), _batch(g, RETAIN, scale)
        context = {
            "progress": progress, "ref_forget": _batch(g, FORGET, scale),
            "ref_retain": _batch(g, RETAIN, scale), "idk": _batch(g, FORGET, scale),
            "ref_idk": _batch(g, FORGET, scale),
            "hidden_forget": torch.randn(FORGET, WIDTH, HIDDEN, generator=g),
            "hidden_retain": torch.randn(RETAIN, WIDTH, HIDDEN, generator=g),
            "ref_hidden_forget": torch.randn(FORGET, WIDTH, HIDDEN, generator=g),
            "ref_hidden_retain": torch.randn(RETAIN, WIDTH, HIDDEN, generator=g),
            "control_vector": control}
        return SmokeCase(name, (forget, retain), context, constant=constant)

    cases = [case("ordinary logits (3 × randn)", 3.0), case("confident logits (30 × randn)",
                                                            30.0)]
    if objective.wants(hook, "progress"):
        cases += [case("progress=0.0", 3.0, 0.0), case("progress=1.0", 3.0, 1.0)]
    problems = check_loss_hook(objective, hook, cases, batch=FORGET,
                               inputs="the model's outputs")
    return [_no_update(objective, hook, cases[0], p) for p in problems]


def _no_update(objective: LoadedObjective, hook: str, case: SmokeCase, problem: Problem) -> Problem:
    """A loss that is exactly 0 everywhere leaves the target untouched: the suite's reference
    row (``target``). Legal, so a warning; a loss that is not 0 but has no gradient stays an
    error."""
    if problem.code != "no-grad" or "zero everywhere" not in problem.message:
        return problem
    out = objective.bind(hook)(*case.args, **case.context)
    if bool((out == 0).all()):
        return Problem("no-update", "warning", f"{hook} is 0 everywhere: unlearning leaves the "
                       "target model as it is (the suite's reference row, 'target')")
    return problem
