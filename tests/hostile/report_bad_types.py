"""Makes the child write a well-formed report.json with fields of the wrong types: the
isolation record a list, wall_time a string.

Expected: the worker keeps only fields of the expected types and records the isolation
and wall time itself: an ``ok`` cell with the parent's isolation record and wall time,
never an exception out of run_cells_sandboxed.
"""

import json

import torch.nn.functional as F

_dumps = json.dumps


def _typed_wrong(report, **kw):
    return _dumps({**report, "isolation": ["none"], "wall_time": "fast"}, **kw)


json.dumps = _typed_wrong


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
