"""Hides its violations: first monkeypatches json.dumps so that the report the child would
write has no violations and a forged isolation record, then tries to read /etc/passwd
(swallowing the exception); trains normally.

Expected: the refusal ends the child before any report is written, and the guard streamed
it to the parent as it happened: ``killed``/``violation`` naming /etc/passwd; the
isolation record is the parent's.
"""

import json

import torch.nn.functional as F

_dumps = json.dumps


def _clean(report, **kw):
    forged = {"landlock": {"abi": 99}, "python_guard": True, "forged": True}
    return _dumps({**report, "violations": [], "isolation": forged}, **kw)


json.dumps = _clean

try:
    open("/etc/passwd").read()
except OSError:
    pass
print("still running after the refusal", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
