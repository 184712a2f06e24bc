"""Trainer outputs: assembled as plain numpy arrays by ``train``, checked by ``judge``.

The arrays cross the sandbox boundary, so the judge treats every one as untrusted:
:func:`check_array` accepts an array only with the expected name, shape, dtype kind,
range and finiteness. Stacked model weights travel as ``param:NAME`` arrays of shape
``[M, ...]`` (one row per member); a member whose loss diverged has its weights frozen
at zero and the step in ``diverged_step`` (``-1``: it did not diverge).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from harness.contract.pipeline import InvalidOutput

PARAM = "param:"


def check_array(outputs: Mapping[str, Any], name: str, shape: tuple[int, ...], kinds: str,
                *, finite: bool = False, low: float | None = None,
                high: float | None = None) -> np.ndarray:
    """``outputs[name]`` if it is an array of ``shape`` whose dtype kind is in ``kinds``."""
    if name not in outputs:
        raise InvalidOutput(f"the trainer returned no {name!r}")
    a = outputs[name]
    if not isinstance(a, np.ndarray) or a.dtype.kind not in kinds or a.dtype == object:
        raise InvalidOutput(f"{name} must be a numeric array of kind {kinds!r}, "
                            f"got {getattr(a, 'dtype', type(a).__name__)}")
    if tuple(a.shape) != tuple(shape):
        raise InvalidOutput(f"{name} must have shape {tuple(shape)}, got {tuple(a.shape)}")
    if finite and a.size and not np.isfinite(a).all():
        raise InvalidOutput(f"{name} contains non-finite values")
    if a.size and low is not None and a.min() < low:
        raise InvalidOutput(f"{name} has values below {low}")
    if a.size and high is not None and a.max() > high:
        raise InvalidOutput(f"{name} has values above {high}")
    return a


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


def truncate(curves: dict[str, list[float]], points: int) -> dict[str, list[float]]:
    """Curves cut after ``points`` values: a diverged member's curves end where it froze."""
    return {k: v[:points] for k, v in curves.items()}
