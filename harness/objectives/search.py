"""Search spaces, declared as data, and the one quasi-random sampler that draws trials.

An objective declares a range for each hyperparameter it lets a tuner move, as a plain
dict in its module (no import from the harness, so an objective file stays a file):

    SEARCH_SPACE = {
        "q": {"low": 0.1, "high": 1.0},                  # a float, uniform
        "alpha": {"low": 0.01, "high": 10.0, "log": True},  # a float, log-uniform
        "k": {"low": 1, "high": 5},                       # an int (both bounds ints)
        "variant": {"choices": ["a", "b"]},               # one of a few values
        "eps": {"fixed": "numerical safety, not a modelling choice"},  # kept, and why
    }

A suite declares the training settings tuned for everyone (the learning rate at least) in
the same form (:class:`harness.contract.suite.Tuning`). Every trial of a tuned run is a
point of one scrambled Halton sequence (Bousquet et al. 2017's "quasi-random search", which
AlgoPerf's external tuning uses too): the suite's settings take its first dimensions, the
objective's hyperparameters the ones after, in declaration order. A Halton point's
coordinate ``j`` depends only on ``j`` and the seed, so every objective of a suite gets the
same ``k`` learning rates, whatever number of knobs of its own it adds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KEYS = {"low", "high", "log", "choices", "fixed"}


class SearchSpaceError(ValueError):
    """A search space that cannot be sampled, phrased for its author."""


@dataclass(frozen=True)
class Dimension:
    """One tuned value: ``kind`` is "float", "int" or "choice"."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def value(self, u: float) -> Any:
        """The value at ``u`` in [0, 1): uniform (or log-uniform) between the bounds, both
        included for an int; choices in equal shares."""
        if self.kind == "choice":
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        if self.kind == "int":
            low, high = self.low - 0.5, self.high + 0.5  # each integer an equal share
            if self.log:
                x = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
            else:
                x = low + u * (high - low)
            return int(min(max(math.floor(x + 0.5), self.low), self.high))
        if self.log:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)

    def contains(self, value: Any) -> bool:
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return self.low <= value <= self.high

    def describe(self) -> str:
        if self.kind == "choice":
            return "{" + ", ".join(map(repr, self.choices)) + "}"
        scale = ", log" if self.log else ""
        return f"[{self.low:g}, {self.high:g}{scale}]" + (" int" if self.kind == "int" else "")


def parse(space: Any, *, what: str = "SEARCH_SPACE",
          defaults: Mapping[str, Any] | None = None) -> tuple[Dimension, ...]:
    """The dimensions of a declared space, checked: every name a hyperparameter (when
    ``defaults`` are given), each range well formed, each default inside its range and of
    its type. Raises :class:`SearchSpaceError` naming the first problem."""
    if not isinstance(space, Mapping):
        raise SearchSpaceError(f"{what} must be a dict of name -> range, got "
                               f"{type(space).__name__}")
    out = []
    for name, spec in space.items():
        where = f"{what}[{name!r}]"
        if not isinstance(name, str):
            raise SearchSpaceError(f"{what}: names are strings, got {name!r}")
        if defaults is not None and name not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise SearchSpaceError(f"{where}: not a hyperparameter of this objective "
                                   f"(it has: {known})")
        if isinstance(spec, Mapping) and "fixed" in spec:  # declared untuned, with a reason
            if set(spec) != {"fixed"} or not isinstance(spec["fixed"], str) \
                    or not spec["fixed"].strip():
                raise SearchSpaceError(f"{where}: 'fixed' stands alone and says why the "
                                       f"hyperparameter is not tuned (a sentence)")
            continue
        dim = _dimension(name, spec, where)
        if defaults is not None:
            _check_default(dim, defaults[name], where)
        out.append(dim)
    return tuple(out)


def checked_space(raw: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A search space as a sandboxed child reported it: kept when it parses against the
    reported defaults, else {} (the child checked it already; what fails here was not
    written by the loader)."""
    try:
        parse(raw, defaults=defaults)
    except (SearchSpaceError, TypeError):
        return {}
    return {str(k): dict(v) for k, v in raw.items()}


def _dimension(name: str, spec: Any, where: str) -> Dimension:
    if not isinstance(spec, Mapping):
        raise SearchSpaceError(f"{where} must be a dict such as {{'low': 0.1, 'high': 1.0}} "
                               f"or {{'choices': [...]}}, got {spec!r}")
    unknown = set(spec) - KEYS
    if unknown:
        raise SearchSpaceError(f"{where}: unknown key(s) {sorted(unknown)} (use "
                               f"{', '.join(sorted(KEYS))})")
    if "choices" in spec:
        if set(spec) != {"choices"}:
            raise SearchSpaceError(f"{where}: 'choices' stands alone (no low/high/log)")
        choices = spec["choices"]
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence) \
                or len(choices) < 2:
            raise SearchSpaceError(f"{where}: 'choices' is a list of at least two values")
        if len(set(map(repr, choices))) < len(choices):
            raise SearchSpaceError(f"{where}: 'choices' repeats a value")
        if not all(isinstance(c, (bool, int, float, str)) for c in choices):
            raise SearchSpaceError(f"{where}: choices are numbers, booleans or strings")
        return Dimension(name, "choice", choices=tuple(choices))
    if "low" not in spec or "high" not in spec:
        raise SearchSpaceError(f"{where}: a range needs 'low' and 'high'")
    low, high, log = spec["low"], spec["high"], spec.get("log", False)
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) \
                or not math.isfinite(bound):
            raise SearchSpaceError(f"{where}: bounds are finite numbers, got {bound!r}")
    if not isinstance(log, bool):
        raise SearchSpaceError(f"{where}: 'log' is True or False, got {log!r}")
    if not low < high:
        raise SearchSpaceError(f"{where}: 'low' ({low}) must be below 'high' ({high})")
    if log and low <= 0:
        raise SearchSpaceError(f"{where}: a log range needs 'low' > 0, got {low}")
    kind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
    return Dimension(name, kind, float(low), float(high), log)


def _check_default(dim: Dimension, default: Any, where: str) -> None:
    if dim.kind == "choice":
        if default not in dim.choices:
            raise SearchSpaceError(f"{where}: the default {default!r} is not one of the "
                                   f"choices {dim.describe()}")
        return
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        raise SearchSpaceError(f"{where}: a numeric range for a hyperparameter whose default "
                               f"is {default!r}; declare 'choices' instead")
    if dim.kind == "float" and isinstance(default, int):
        raise SearchSpaceError(f"{where}: float bounds for an int hyperparameter (default "
                               f"{default!r}); give int bounds")
    if dim.kind == "int" and not isinstance(default, int):
        raise SearchSpaceError(f"{where}: int bounds for a float hyperparameter (default "
                               f"{default!r}); write them as floats (e.g. 1.0)")
    if not dim.low <= default <= dim.high:
        raise SearchSpaceError(f"{where}: the default {default!r} lies outside "
                               f"{dim.describe()}; the author's choice must be a candidate")


def sample(dimensions: Sequence[Dimension], k: int, seed: int) -> list[dict[str, Any]]:
    """``k`` trials: the first ``k`` points of a scrambled Halton sequence in
    ``len(dimensions)`` dimensions (``seed`` fixes the scrambling), mapped through each
    dimension. Deterministic; column ``j`` is the same for any number of dimensions after
    it, so the shared settings of a suite get the same values for every objective."""
    if k < 1:
        raise SearchSpaceError(f"a tuning budget is at least 1 trial, got {k}")
    if not dimensions:
        return [{} for _ in range(k)]
    names = [d.name for d in dimensions]
    if len(set(names)) < len(names):
        raise SearchSpaceError(f"a dimension name repeats: {names}")
    points = unit_points(len(dimensions), k, seed)
    return [{d.name: d.value(float(u)) for d, u in zip(dimensions, row, strict=True)}
            for row in points]


def trials(settings: Sequence[Dimension], hyper: Sequence[Dimension], k: int,
           seed: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``k`` trials of a tuned run, each ``(settings, hyperparameters)``: one sample over
    the suite's tuned settings (first columns) and the objective's space (after them), so
    that every objective of the suite gets the same settings' values."""
    if k < 1:
        raise SearchSpaceError(f"a tuning budget is at least 1 trial, got {k}")
    if not settings and not hyper:
        return [({}, {}) for _ in range(k)]
    points = unit_points(len(settings) + len(hyper), k, seed)
    cut = len(settings)
    return [({d.name: d.value(float(u)) for d, u in zip(settings, row[:cut], strict=True)},
             {d.name: d.value(float(u)) for d, u in zip(hyper, row[cut:], strict=True)})
            for row in points]


def unit_points(d: int, k: int, seed: int) -> Any:
    """The ``[k, d]`` points in [0, 1) behind :func:`sample`: scipy's scrambled Halton
    sequence. It draws each column's permutations in order from one generator, so the
    first ``j`` columns do not depend on how many follow (tested: the property the
    shared settings rely on), and the first ``k`` points not on how many are drawn."""
    from scipy.stats import qmc

    return qmc.Halton(d, scramble=True, rng=seed).random(k)
