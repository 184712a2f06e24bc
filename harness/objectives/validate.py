"""Check an objective before anything runs, and report every problem found.

``validate(spec)`` loads the objective (any :class:`ObjectiveError` becomes a
problem with the same code), then runs each hook's smoke test, named by its
:class:`~harness.objectives.spec.HookSpec` (a suite declares one for every hook it
introduces). For loss-like hooks, :func:`check_loss_hook` does the work on a suite's
input cases: the hook must return a floating tensor, scalar or per-sample, finite on
every case (ordinary, confident and all-zero logits for ``classification_loss``), with
a finite, non-zero gradient to its inputs; finally it runs seed-batched under
``torch.func.vmap``, as the trainer does; failing that is a warning, since the trainer
falls back to a loop.

torch is imported inside functions only: importing this module stays cheap.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.objectives.loading import (
    LoadedObjective,
    ObjectiveError,
    load_objective,
    module_file_of,
    user_traceback,
)

BATCH, CLASSES = 8, 10
ORDINARY = "the ordinary batch"


@dataclass(frozen=True)
class Problem:
    code: str
    severity: str  # "error" | "warning"
    message: str


@dataclass
class Validation:
    spec: str
    objective: LoadedObjective | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def __str__(self) -> str:
        return self.format()

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


class SandboxValidation(Validation):
    """A validation made in the sandbox: its objective is metadata (hook names, defaults),
    the hooks' signatures stayed there."""

    def _verdict(self) -> str:
        if not (self.ok and self.objective is not None):
            return super()._verdict()
        o = self.objective
        hp = ", ".join(f"{k}={v!r}" for k, v in o.hyperparameters.items())
        return (f"OK: {o.name} — {', '.join(o.hooks)}" + (f" ({hp})" if hp else "")
                + " (checked in the sandbox)")


def validate(spec: str, overrides: Mapping[str, Any] | None = None) -> Validation:
    """Load ``spec`` and smoke-test its hooks; never raises for problems in user code."""
    report = Validation(spec)
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
        report.problems.extend(smoke_test(hook)(report.objective, hook))
    if report.ok:
        report.problems.extend(check_search_space(
            report.objective, {p.code for p in report.problems}))
    return report


def check_search_space(objective: LoadedObjective, seen: set[str]) -> list[Problem]:
    """The hooks smoke-tested again at each end of every declared range (each choice):
    a tuner will train there. A numeric hyperparameter the space leaves out is a warning:
    a tuned run keeps it at its default (unless the space declares it ``fixed``, with why).
    ``seen``: the codes of the problems found at the defaults, whose warnings are not
    repeated for each end."""
    import dataclasses

    problems = []
    missing = [k for k, v in objective.hyperparameters.items()
               if k not in objective.search_space and isinstance(v, int | float)
               and not isinstance(v, bool)]
    if missing:
        problems.append(Problem("search-space", "warning", (
            f"no range in SEARCH_SPACE for {', '.join(map(repr, missing))}: a tuned run "
            f"keeps {'it' if len(missing) == 1 else 'them'} at the default (declare e.g. "
            f"SEARCH_SPACE = {{{missing[0]!r}: {{'low': ..., 'high': ...}}}}, or "
            f"{{'fixed': 'why it is not tuned'}})")))
    for dim in objective.dimensions:
        ends = dim.choices if dim.kind == "choice" else (
            (int(dim.low), int(dim.high)) if dim.kind == "int" else (dim.low, dim.high))
        for value in dict.fromkeys(ends):
            if value == objective.hyperparameters.get(dim.name):
                continue  # checked above
            at = dataclasses.replace(objective, hyperparameters={
                **objective.hyperparameters, dim.name: value})
            for hook in objective.hooks:
                for p in smoke_test(hook)(at, hook):
                    if p.severity == "warning" and p.code in seen:
                        continue  # said once already, at the defaults
                    problems.append(dataclasses.replace(
                        p, code="search-space",
                        message=f"at {dim.name}={value!r} (in SEARCH_SPACE): {p.message}"))
    return problems


def describe_hooks(objective: LoadedObjective) -> str:
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


# --- smoke tests -----------------------------------------------------------------


@dataclass
class SmokeCase:
    """One input case for a loss-like hook: positional tensors and the context on offer
    (the bound hook takes only what it asks for). Floating tensors, in the arguments or
    in the context (nested in lists and tuples, or returned by a context function), get
    gradients; the loss must reach at least one of them. ``constant`` names context that
    gets none (a memory the hook writes in place, fixed reference values)."""

    name: str
    args: tuple
    context: dict[str, Any]
    constant: tuple[str, ...] = ()


def check_loss_hook(objective: LoadedObjective, hook: str, cases: list[SmokeCase], *, batch: int,
                    inputs: str) -> list[Problem]:
    """Run a loss-like hook on ``cases`` (the first is the ordinary batch) and, when they
    pass, seed-batched under vmap: every suite's smoke test for such hooks ends here.
    ``inputs`` names the inputs in messages ("the logits")."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fn, filename = objective.bind(hook), _user_file(objective, hook)
        found: dict[str, list[tuple[str, str]]] = {}  # code -> [(case, detail)]
        for case in cases:
            for code, detail in _run_case(fn, case, batch, inputs, filename,
                                          ordinary=case is cases[0]):
                found.setdefault(code, []).append((case.name, detail))
            if case is cases[0] and found:
                break  # a broken contract on the ordinary batch makes the rest noise
        problems = [Problem(code, "error", _merge(hook, code, hits, cases[0].name))
                    for code, hits in found.items()]
        if not problems:
            problems += _check_vmap(fn, hook, cases[0])
        return problems


def call_for_tensor(fn: Callable, hook: str, case: str, what: str, *args: Any,
                    **kwargs: Any) -> tuple[Any, list[Problem]]:
    """``fn(*args, **kwargs)`` for a hook that returns a tensor (a post-hoc hook's
    probabilities): ``(output, [])``, or ``(None, [the problem])`` when it raised or
    returned something else, named with the smoke ``case``."""
    import torch

    try:
        out = fn(*args, **kwargs)
    except Exception as exc:
        return None, [Problem("exception", "error",
                              f"{hook} raised {type(exc).__name__}: {exc} ({case})")]
    if not isinstance(out, torch.Tensor):
        return None, [Problem("type", "error", f"{hook} returned {type(out).__name__}; it "
                              f"must return a tensor of {what} ({case})")]
    return out, []


def classification_cases(wants_progress: bool) -> list[SmokeCase]:
    """A fixed batch of 8 logits over 10 classes, confident and all-zero logits, and the
    ends of training when the hook reads ``progress``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    base = torch.randn(BATCH, CLASSES, generator=gen)
    targets = torch.randint(CLASSES, (BATCH,), generator=gen)

    def case(name: str, logits: Any, progress: float = 0.5) -> SmokeCase:
        return SmokeCase(name, (logits, targets),
                         {"progress": progress,
                          "state": torch.full((BATCH,), float("nan"))})

    cases = [case(ORDINARY, base), case("confident logits (30 × randn)", 30 * base),
             case("all-zero logits", torch.zeros_like(base))]
    if wants_progress:
        cases += [case("progress=0.0", base, 0.0), case("progress=1.0", base, 1.0)]
    return cases


def check_classification_loss(objective: LoadedObjective, hook: str) -> list[Problem]:
    """``classification_loss`` on :func:`classification_cases`."""
    return check_loss_hook(objective, hook,
                           classification_cases(objective.wants(hook, "progress")),
                           batch=BATCH, inputs="the logits")


def _run_case(fn: Callable, case: SmokeCase, batch: int, inputs: str, filename: str, *,
              ordinary: bool) -> list[tuple[str, str]]:
    """[(code, detail)] for one input case; empty when the hook behaves."""
    import torch

    leaves: list[Any] = []
    args = _with_grad(case.args, leaves)
    context = {k: _fresh(v) if k in case.constant else _with_grad(v, leaves)
               for k, v in case.context.items()}
    try:
        out = fn(*args, **context)
    except Exception as exc:
        return [("exception", _exception_detail(exc, filename))]
    contract = _check_output(out, batch, case)
    if contract:
        return [contract]
    if not bool(torch.isfinite(out).all()):
        return [("non-finite", _nonfinite_detail(out))]
    return _check_grad(out, leaves, ordinary, inputs, filename)


def _with_grad(value: Any, leaves: list[Any]) -> Any:
    """A copy of ``value`` whose floating tensors require gradients (collected in ``leaves``);
    context functions return such copies of what they return."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            leaf = value.detach().clone().requires_grad_()
            leaves.append(leaf)
            return leaf
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple (LMBatch)
        return type(value)(*(_with_grad(v, leaves) for v in value))
    if isinstance(value, tuple):
        return tuple(_with_grad(v, leaves) for v in value)
    if isinstance(value, list):
        return [_with_grad(v, leaves) for v in value]
    if isinstance(value, dict):
        return {k: _with_grad(v, leaves) for k, v in value.items()}
    if callable(value):
        return lambda *a, **k: _with_grad(value(*a, **k), leaves)
    return value


def _fresh(value: Any) -> Any:
    """A copy of a constant context tensor (a hook may write it; the case stays as is)."""
    return value.clone() if hasattr(value, "clone") else value


def _check_output(out: Any, batch: int, case: SmokeCase) -> tuple[str, str] | None:
    import torch

    if not isinstance(out, torch.Tensor):
        hint = " (did you call .item() or return a Python number?)" \
            if isinstance(out, int | float) else ""
        return "not-a-tensor", f"returned {type(out).__name__}, not a torch.Tensor{hint}"
    if out.shape not in (torch.Size([]), torch.Size([batch])):
        shape = list(case.args[0].shape)
        return "shape", (f"returned shape {list(out.shape)}; it must return a scalar or a "
                         f"per-sample loss of shape [B] = [{batch}] for "
                         f"{_arg_name(case)} {shape}")
    if not out.is_floating_point():
        return "dtype", f"returned dtype {out.dtype}; the loss must be a floating-point tensor"
    return None


def _arg_name(case: SmokeCase) -> str:
    return "logits" if case.args and getattr(case.args[0], "dim", lambda: 0)() == 2 else \
        "inputs"


def _check_grad(out: Any, leaves: list[Any], ordinary: bool, inputs: str,
                filename: str) -> list[tuple[str, str]]:
    import torch

    loss = out.mean() if out.dim() > 0 else out
    no_path = ("no-grad", f"the loss does not depend on {inputs} (no gradient reaches "
               "them: was something detached, computed under torch.no_grad(), or "
               "rebuilt from .item()?)")
    if not loss.requires_grad:
        return [no_path]
    try:
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    except Exception as exc:
        return [("exception", "while computing the gradient: "
                 + _exception_detail(exc, filename))]
    grads = [g for g in grads if g is not None]
    if not grads:
        return [no_path]
    bad = [g for g in grads if not bool(torch.isfinite(g).all())]
    if bad:
        return [("non-finite-grad", f"the gradient to {inputs} contains "
                 + _nonfinite_kinds(bad[0]))]
    if ordinary and not any(bool(g.any()) for g in grads):
        return [("no-grad", f"the gradient to {inputs} is zero everywhere, so training "
                 "would not move")]
    return []


def _check_vmap(fn: Callable, hook: str, case: SmokeCase) -> list[Problem]:
    """Run the hook for 2 seeds at once under vmap, as the seed-batched trainer does: every
    tensor of the ordinary case (arguments and context) gets a member dimension."""
    import torch
    from torch.func import vmap
    from torch.utils._pytree import tree_leaves, tree_map

    def stack(t: Any) -> Any:
        return torch.stack([t, t.flip(0) if t.is_floating_point() and t.dim() else t]) \
            if isinstance(t, torch.Tensor) else t

    tensors = {k: v for k, v in case.context.items() if _is_tensor_tree(v)}
    static = {k: v for k, v in case.context.items() if k not in tensors}
    args = tree_map(stack, case.args)
    batched = tree_map(stack, tensors)
    varying = (args, {k: v for k, v in batched.items() if k not in case.constant})
    leaves = [t for t in tree_leaves(varying)
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
    for leaf in leaves:
        leaf.requires_grad_()

    def member_loss(args, context):
        out = fn(*args, **context, **static)
        return out.mean() if out.dim() > 0 else out

    try:
        losses = vmap(member_loss)(args, batched)
        if losses.requires_grad:
            torch.autograd.grad(losses.sum(), leaves, allow_unused=True)
    except Exception as exc:
        reason = _short(exc)
        return [Problem("not-vmappable", "warning",
                        f"{hook} cannot run seed-batched (vmap): {reason}; the harness will "
                        f"fall back to a per-seed loop (same numbers, slower)")]
    return []


def _is_tensor_tree(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, list | tuple) and value:
        return all(_is_tensor_tree(v) for v in value)
    return False


# --- messages ---------------------------------------------------------------------


def _merge(hook: str, code: str, hits: list[tuple[str, str]], ordinary: str) -> str:
    """One message per code, naming every input case that produced it."""
    if len(hits) == 1 or code != "non-finite":
        case, detail = hits[0]
        return f"{hook} {detail}" if case == ordinary else f"{hook}, on {case}: {detail}"
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


def _user_file(objective: LoadedObjective, hook: str) -> str:
    return objective.path or module_file_of(objective.hooks[hook])


def smoke_test(hook: str) -> Callable[[LoadedObjective, str], list[Problem]]:
    """The hook's smoke test, named by its :class:`~harness.objectives.spec.HookSpec`."""
    import importlib

    from harness.contract import registry
    module, _, name = registry.hooks()[hook].smoke.partition(":")
    return getattr(importlib.import_module(module), name)
