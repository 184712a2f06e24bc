"""Makes the child write a well-formed report.json with fields of the wrong types: the
isolation record a list, wall_time a string.

Expected: the worker validates the untrusted report: a clear cell status, never an
exception out of run_cells_sandboxed.
"""

import json

import torch.nn.functional as F

_dumps = json.dumps


def _typed_wrong(report, **kw):
    return _dumps({**report, "isolation": ["none"], "wall_time": "fast"}, **kw)


json.dumps = _typed_wrong


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
