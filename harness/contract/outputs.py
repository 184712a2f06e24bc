"""Trainer outputs: assembled as plain numpy arrays by ``train``, checked by ``judge``.

The arrays cross the sandbox boundary, so the judge treats every one as untrusted:
:func:`check_array` accepts an array only with the expected name, shape, dtype kind,
range and finiteness, and :func:`probability_rows` says why rows returned as
probabilities are not. Stacked model weights travel as ``param:NAME`` arrays of shape
``[M, ...]`` (one row per member); a member whose loss diverged has its weights frozen
at zero and the step in ``diverged_step`` (``-1``: it did not diverge).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from harness.contract.pipeline import InvalidOutput

PARAM = "param:"
ROW_SUM_TOLERANCE = 1e-3  # float32 softmax rows of 1000 classes sum to 1 within ~1e-6
KINDS = {"f": "floating", "iu": "integer", "i": "signed integer", "u": "unsigned integer",
         "b": "boolean"}  # dtype kinds, as an error message names them


def check_array(outputs: Mapping[str, Any], name: str, shape: tuple[int, ...], kinds: str,
                *, finite: bool = False, low: float | None = None,
                high: float | None = None) -> np.ndarray:
    """``outputs[name]`` if it is an array of ``shape`` whose dtype kind is in ``kinds``."""
    if name not in outputs:
        raise InvalidOutput(f"the trainer returned no {name!r}")
    a = outputs[name]
    if not isinstance(a, np.ndarray) or a.dtype.kind not in kinds or a.dtype == object:
        raise InvalidOutput(f"{name}: expected {KINDS.get(kinds, 'numeric')} values (kind "
                            f"{kinds!r}), got {getattr(a, 'dtype', type(a).__name__)}")
    if tuple(a.shape) != tuple(shape):
        raise InvalidOutput(f"{name} must have shape {tuple(shape)}, got {tuple(a.shape)}")
    if finite and a.size and not np.isfinite(a).all():
        raise InvalidOutput(f"{name} contains non-finite values")
    if a.size and low is not None and a.min() < low:
        raise InvalidOutput(f"{name} has values below {low}")
    if a.size and high is not None and a.max() > high:
        raise InvalidOutput(f"{name} has values above {high}")
    return a


def probability_rows(probs: np.ndarray, *, slack: float = 0.0,
                     at: Callable[[int], str] | None = None) -> str:
    """Why ``probs [..., K]`` are not rows of probabilities (finite, in [0, 1] within
    ``slack``, each summing to 1 within ``ROW_SUM_TOLERANCE``); ``""`` when they are.

    The reason reads "returned ...", for the caller to say who returned them. ``at(row)``
    says where the first offending row is (its index over the leading axes, flattened),
    e.g. ``"at batch 3"``; without it, the reason says how many values are not finite,
    the smallest and largest value, or how far the worst row's sum is from 1.
    """
    def first(ok: np.ndarray) -> int:
        return int(np.flatnonzero(~ok)[0])

    finite = np.isfinite(probs).all(-1)
    if not finite.all():
        if at is not None:
            return f"returned non-finite probabilities {at(first(finite))}"
        return (f"returned {int((~np.isfinite(probs)).sum())} non-finite probabilities "
                f"(NaN or inf)")
    inside = ((probs >= -slack) & (probs <= 1 + slack)).all(-1)
    if not inside.all():
        if at is not None:
            return f"returned probabilities outside [0, 1] {at(first(inside))}"
        return (f"returned probabilities outside [0, 1] (min {probs.min():.4g}, "
                f"max {probs.max():.4g})")
    off = np.abs(probs.astype(np.float64).sum(axis=-1) - 1)
    summed = off <= ROW_SUM_TOLERANCE
    if not summed.all():
        if at is not None:
            return f"returned rows that do not sum to 1 {at(first(summed))}"
        return (f"returned rows that do not sum to 1 (off by up to {float(off.max()):.4g}; "
                f"tolerance {ROW_SUM_TOLERANCE})")
    return ""


def params_out(params: Mapping[str, Any], prefix: str = PARAM) -> dict[str, np.ndarray]:
    """Stacked tensors ``{name: [M, ...]}`` as the arrays ``{prefix + name: ...}``."""
    return {f"{prefix}{k}": v.detach().cpu().numpy() for k, v in params.items()}


def params_in(outputs: Mapping[str, Any], shapes: Iterable[tuple[str, tuple[int, ...]]],
              members: int, alive: np.ndarray, prefix: str = PARAM) -> dict[str, Any]:
    """Stacked float32 tensors from the arrays ``prefix + name`` of ``[members, *shape]``,
    each finite for every member that did not diverge; own, writable copies."""
    import torch

    params = {}
    for name, shape in shapes:
        a = check_array(outputs, f"{prefix}{name}", (members, *shape), "f")
        if alive.any() and not np.isfinite(a[alive]).all():
            raise InvalidOutput(f"{prefix}{name} is not finite for a member that did not "
                                f"diverge")
        params[name] = torch.from_numpy(np.array(a, dtype=np.float32))
    return params


def diverged_out(steps: list[int | None]) -> np.ndarray:
    """Per member: the first step with a non-finite loss, or -1."""
    return np.array([-1 if d is None else d for d in steps], dtype=np.int64)


def diverged_in(outputs: Mapping[str, Any], members: int, total_steps: int) -> np.ndarray:
    return check_array(outputs, "diverged_step", (members,), "iu", low=-1, high=total_steps)
