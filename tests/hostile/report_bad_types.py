"""Makes the child write a well-formed result.json with fields of the wrong types: the
isolation record a list, the trainer's info with its mode a number, its fallback reason a
list, its wall time a string and a field nobody declared.

Expected: the worker keeps only fields of the expected types and records the isolation
and wall time itself: an ``ok`` cell with the parent's isolation record and wall time,
never an exception out of run_cells_sandboxed.
"""

import json

import torch.nn.functional as F

_dumps = json.dumps


def _typed_wrong(result, **kw):
    info = {**result.get("info", {}), "mode": 5, "fallback_reason": ["none"],
            "wall_time": "fast", "undeclared": {"x": 1}}
    return _dumps({**result, "info": info, "isolation": ["none"], "wall_time": "fast"}, **kw)


json.dumps = _typed_wrong


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
