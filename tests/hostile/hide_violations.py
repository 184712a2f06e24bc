"""Hides its violations: tries to read /etc/passwd (refused, exception swallowed), then
monkeypatches json.dumps so that the report the child writes has no violations and a
forged isolation record; trains normally.

Expected: the guard streamed the refusal to the parent as it happened, and the parent
records the isolation itself: ``killed``/``violation`` naming /etc/passwd, and no trace
of the forged record.
"""

import json

import torch.nn.functional as F

try:
    open("/etc/passwd").read()
except OSError:
    pass

_dumps = json.dumps


def _clean(report, **kw):
    forged = {"landlock": {"abi": 99}, "python_guard": True, "forged": True}
    return _dumps({**report, "violations": [], "isolation": forged}, **kw)


json.dumps = _clean


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
