"""Makes the child write a result.json that crashes the parent's JSON parser: 100,000
nested arrays (under the 1 MiB report cap), by monkeypatching json.dumps.

Expected: the worker treats the report as untrusted input: an unreadable report is no
report, so a ``failed``/``crash`` cell, never an exception out of run_cells_sandboxed
(which a worker would retry as an infrastructure error).
"""

import json

import torch.nn.functional as F

json.dumps = lambda *args, **kw: "[" * 100_000 + "]" * 100_000


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
