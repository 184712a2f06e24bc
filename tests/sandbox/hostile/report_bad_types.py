"""Sends well-formed JSON with fields of the wrong types, where the worker used to read
result.json: patches json.dumps so that its hello (what the objective declares) has a
name that is a number, junk among its hooks, context asking for ``index`` and for names
no hook has, hyperparameters holding a list and a dict, defaults and ``MODEL`` that are
not objects, and an isolation record and wall time of its own; and so that every reply
header carries the same forged isolation record and wall time.

Expected: the worker keeps only fields of the expected types (never ``index``: it is
not sent) and records the isolation and wall time itself: an ``ok`` cell, scored as
plain cross-entropy, with the worker's isolation record and wall time; never an
exception out of run_cells_sandboxed.
"""

import json

import torch.nn.functional as F

_dumps = json.dumps
FORGED = {"isolation": ["none"], "wall_time": "fast", "sandbox": {"python_guard": False}}


def _typed_wrong(header, **kw):
    if isinstance(header, dict) and isinstance(header.get("hello"), dict):
        hello = header["hello"]
        hello = {**hello, "name": 12345, "hooks": [*hello["hooks"], 5, None, {"x": 1}, "index"],
                 "context": {**hello["context"], "classification_loss": ["index", 7, "bogus"],
                             "5": "x"},
                 "hyperparameters": {"lr": [1, 2], "nested": {"a": 1}, "kept": 0.5},
                 "defaults": "not an object", "model": ["not", "an", "object"], **FORGED}
        header = {**header, "hello": hello}
    if isinstance(header, dict):
        header = {**header, **FORGED}
    return _dumps(header, **kw)


json.dumps = _typed_wrong


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
