"""The held-out column: each objective's mean on the suite's held-out variants
(``Suite.held_out``, drawn from the server's secret) beside its public twin's.

Only means leave this module: the cells of a held-out variant are in no table or API
answer. Only cells drawn under the current secret count (their variant hash names it), so
a rotated secret starts the column afresh. A server without the secret shows none.
"""

from __future__ import annotations

import math

import numpy as np

from harness.contract import heldout
from harness.contract.suite import Suite
from harness.storage.models import Cell, Metric


def held_out_columns(suite: Suite, rows: list[dict]) -> list[dict]:
    """Per held-out variant: ``{"variant", "twin"}``; each row (an across-table row with
    ``version_id`` and per-variant ``cells``) gains ``held_out``: per column its mean over
    seeds, seed count and ``gap`` (the held-out mean's improvement over the twin's: negative
    = worse on the held-out draw). [] without held-out variants or the secret."""
    if not suite.held_out or not heldout.available():
        return []
    head = suite.headline_metric
    hashes = {v.name: v.config_hash(suite) for v in suite.held_out}
    values: dict[tuple[int, str], list[float]] = {}
    for vid, variant, vhash, value in Metric.objects.filter(
            name=head.name, cell__suite=suite.name, cell__suite_version=suite.version,
            cell__status=Cell.OK, cell__variant__in=list(hashes),
            cell__version__in=[r["version_id"] for r in rows]).values_list(
            "cell__version_id", "cell__variant", "cell__variant_hash", "value"):
        if vhash == hashes[variant] and math.isfinite(value):
            values.setdefault((vid, variant), []).append(value)
    if not values:
        return []
    for r in rows:
        twins = {c["variant"]: c["mean"] for c in r["cells"]}
        r["held_out"] = []
        for v in suite.held_out:
            seeds = values.get((r["version_id"], v.name), [])
            mean = float(np.mean(seeds)) if seeds else None
            twin = twins.get(v.held_out_of)
            gap = head.improvement(mean, twin) if mean is not None and twin is not None else None
            r["held_out"].append({"mean": mean, "seeds": len(seeds), "gap": gap})
    return [{"variant": v.name, "twin": v.held_out_of} for v in suite.held_out]
