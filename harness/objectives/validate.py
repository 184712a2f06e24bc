"""Check an objective before anything runs, and report every problem found.

``validate(spec)`` loads the objective (any :class:`ObjectiveError` becomes a
problem with the same code), then smoke-tests each hook on a small, fixed batch:
it must return a floating tensor, scalar or per-sample, finite on ordinary,
confident and all-zero logits, with a finite, non-zero gradient to the logits.
Finally it tries the hook seed-batched under ``torch.func.vmap``, as the trainer
does; failing that is a warning, since the trainer falls back to a loop.

torch is imported inside functions only: importing this module stays cheap.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.objectives.loading import (
    Objective,
    ObjectiveError,
    load_objective,
    module_file_of,
    user_traceback,
)

BATCH, CLASSES, STATE_SIZE = 8, 10, 32
ORDINARY = "the ordinary batch"


@dataclass(frozen=True)
class Problem:
    code: str
    severity: str  # "error" | "warning"
    message: str


@dataclass
class Report:
    spec: str
    objective: Objective | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def format(self) -> str:
        """One block per problem, then a verdict line."""
        blocks = [_format_problem(p) for p in self.problems]
        blocks.append(self._verdict())
        return "\n\n".join(blocks)

    def _verdict(self) -> str:
        if self.ok and self.objective is not None:
            return f"OK: {self.objective.name} — {describe_hooks(self.objective)}"
        errors = sum(p.severity == "error" for p in self.problems)
        return f"FAILED: {self.spec} — {errors} error{'s' if errors != 1 else ''}"


def validate(spec: str, overrides: Mapping[str, Any] | None = None) -> Report:
    """Load ``spec`` and smoke-test its hooks; never raises for problems in user code."""
    report = Report(spec)
    try:
        report.objective = load_objective(spec, overrides)
    except ObjectiveError as exc:
        report.problems.append(Problem(exc.code, "error", exc.message))
        return report
    except Exception as exc:  # e.g. a module whose source cannot be read
        report.problems.append(Problem("import", "error", f"cannot load {spec}: "
                                       f"{type(exc).__name__}: {exc}"))
        return report
    for hook in report.objective.hooks:
        check = SMOKE_TESTS.get(hook)
        if check is not None:
            report.problems.extend(check(report.objective, hook))
    return report


def describe_hooks(objective: Objective) -> str:
    """``classification_loss(q=0.7)``: each hook with the hyperparameters it takes."""
    parts = []
    for hook, fn in objective.hooks.items():
        names = [n for n in inspect.signature(fn).parameters if n in objective.hyperparameters]
        args = ", ".join(f"{n}={objective.hyperparameters[n]!r}" for n in names)
        parts.append(f"{hook}({args})")
    return "; ".join(parts)


def _format_problem(problem: Problem) -> str:
    first, *rest = problem.message.splitlines() or [""]
    lines = [f"{problem.severity}: [{problem.code}] {first}"]
    lines += ["  " + line if line.strip() else "" for line in rest]
    return "\n".join(lines)


# --- classification_loss smoke test ------------------------------------------------


@dataclass
class _Case:
    name: str
    logits: Any  # Tensor [B, C]
    progress: float


def check_classification_loss(objective: Objective, hook: str) -> list[Problem]:
    """Run the hook on a fixed batch and edge cases; check output, gradient and vmap."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return _check_classification(objective, hook)


def _check_classification(objective: Objective, hook: str) -> list[Problem]:
    import torch

    gen = torch.Generator().manual_seed(0)
    base = torch.randn(BATCH, CLASSES, generator=gen)
    targets = torch.randint(CLASSES, (BATCH,), generator=gen)
    cases = [_Case(ORDINARY, base, 0.5),
             _Case("confident logits (30 × randn)", 30 * base, 0.5),
             _Case("all-zero logits", torch.zeros_like(base), 0.5)]
    if objective.wants(hook, "progress"):
        cases += [_Case("progress=0.0", base, 0.0), _Case("progress=1.0", base, 1.0)]
    fn, filename = objective.bind(hook), _user_file(objective, hook)
    found: dict[str, list[tuple[str, str]]] = {}  # code -> [(case, detail)]
    for case in cases:
        for code, detail in _run_case(fn, hook, case, targets, filename):
            found.setdefault(code, []).append((case.name, detail))
        if case.name == ORDINARY and found:
            break  # a broken contract on the ordinary batch makes the rest noise
    problems = [Problem(code, "error", _merge(hook, code, hits)) for code, hits in found.items()]
    if not problems:
        problems += _check_vmap(fn, hook, base, targets)
    return problems


def _run_case(fn: Callable, hook: str, case: _Case, targets: Any,
              filename: str) -> list[tuple[str, str]]:
    """[(code, detail)] for one input case; empty when the hook behaves."""
    import torch

    logits = case.logits.clone().requires_grad_()
    context = {"progress": case.progress, "index": torch.arange(BATCH),
               "state": torch.full((STATE_SIZE,), float("nan"))}
    try:
        out = fn(logits, targets, **context)
    except Exception as exc:
        return [("exception", _exception_detail(exc, filename))]
    contract = _check_output(out)
    if contract:
        return [contract]
    if not bool(torch.isfinite(out).all()):
        return [("non-finite", _nonfinite_detail(out))]
    return _check_grad(out, logits, case.name == ORDINARY, filename)


def _check_output(out: Any) -> tuple[str, str] | None:
    import torch

    if not isinstance(out, torch.Tensor):
        hint = " (did you call .item() or return a Python number?)" \
            if isinstance(out, int | float) else ""
        return "not-a-tensor", f"returned {type(out).__name__}, not a torch.Tensor{hint}"
    if out.shape not in (torch.Size([]), torch.Size([BATCH])):
        return "shape", (f"returned shape {list(out.shape)}; it must return a scalar or a "
                         f"per-sample loss of shape [B] = [{BATCH}] for logits [{BATCH}, "
                         f"{CLASSES}]")
    if not out.is_floating_point():
        return "dtype", f"returned dtype {out.dtype}; the loss must be a floating-point tensor"
    return None


def _check_grad(out: Any, logits: Any, ordinary: bool,
                filename: str) -> list[tuple[str, str]]:
    import torch

    loss = out.mean() if out.dim() > 0 else out
    no_path = ("no-grad", "the loss does not depend on the logits (no gradient reaches "
               "them: was something detached, computed under torch.no_grad(), or "
               "rebuilt from .item()?)")
    if not loss.requires_grad:
        return [no_path]
    try:
        (grad,) = torch.autograd.grad(loss, logits, allow_unused=True)
    except Exception as exc:
        return [("exception", "while computing the gradient: "
                 + _exception_detail(exc, filename))]
    if grad is None:
        return [no_path]
    if not bool(torch.isfinite(grad).all()):
        return [("non-finite-grad", "the gradient to the logits contains "
                 + _nonfinite_kinds(grad))]
    if ordinary and not bool(grad.any()):
        return [("no-grad", "the gradient to the logits is zero everywhere, so training "
                 "would not move")]
    return []


def _check_vmap(fn: Callable, hook: str, base: Any, targets: Any) -> list[Problem]:
    """Run the hook for 2 seeds at once under vmap, as the seed-batched trainer does."""
    import torch
    from torch.func import vmap

    def member_loss(logits, targets, index, state, progress):
        out = fn(logits, targets, progress=progress, index=index, state=state)
        return out.mean() if out.dim() > 0 else out

    logits = torch.stack([base, base.flip(0)]).requires_grad_()
    args = (logits, targets.expand(2, BATCH), torch.arange(BATCH).expand(2, BATCH),
            torch.full((2, STATE_SIZE), float("nan")), 0.5)
    try:
        losses = vmap(member_loss, in_dims=(0, 0, 0, 0, None))(*args)
        torch.autograd.grad(losses.sum(), logits)
    except Exception as exc:
        reason = _short(exc)
        return [Problem("not-vmappable", "warning",
                        f"{hook} cannot run seed-batched (vmap): {reason}; the harness will "
                        f"fall back to a per-seed loop (same numbers, slower)")]
    return []


# --- messages ---------------------------------------------------------------------


def _merge(hook: str, code: str, hits: list[tuple[str, str]]) -> str:
    """One message per code, naming every input case that produced it."""
    if len(hits) == 1 or code != "non-finite":
        case, detail = hits[0]
        return f"{hook} {detail}" if case == ORDINARY else f"{hook}, on {case}: {detail}"
    lines = [f"{hook} returned a non-finite loss on {len(hits)} input cases:"]
    lines += [f"  {case}: {detail.removeprefix('returned ')}" for case, detail in hits]
    return "\n".join(lines)


def _exception_detail(exc: Exception, filename: str) -> str:
    text = f"raised {type(exc).__name__}: {exc}"
    lines = user_traceback(exc, filename) if filename else ""
    return text + (f"\n{lines}" if lines else "")


def _nonfinite_detail(out: Any) -> str:
    kinds = _nonfinite_kinds(out)
    if out.dim() == 0:
        return f"returned {kinds}"
    bad = int((~out.isfinite()).sum())
    return f"returned {kinds} ({bad} of {out.numel()} samples)"


def _nonfinite_kinds(t: Any) -> str:
    import torch

    kinds = [k for k, present in (("NaN", bool(torch.isnan(t).any())),
                                  ("inf", bool(torch.isinf(t).any()))) if present]
    return " and ".join(kinds)


def _short(exc: BaseException) -> str:
    """``Type: first sentence`` of an exception, for a one-line reason."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > 100 and ". " in first:
        first = first.split(". ", 1)[0]
    return f"{type(exc).__name__}: {first.rstrip('.')}" if first else type(exc).__name__


def _user_file(objective: Objective, hook: str) -> str:
    return objective.path or module_file_of(objective.hooks[hook])


SMOKE_TESTS: dict[str, Callable[[Objective, str], list[Problem]]] = {
    "classification_loss": check_classification_loss,
}
