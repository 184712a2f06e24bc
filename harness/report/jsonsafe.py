"""Plain JSON from results: NaN and infinities (a metric that does not apply, the mean of no
seeds) become ``null``, numpy scalars Python numbers, tuples lists. The one such helper the
CLI, the pages, the cache and the API share."""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, recursively."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {k if isinstance(k, str | int) else str(k): finite_or_none(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value
