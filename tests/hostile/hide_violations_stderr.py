"""Hides its violations from both records: points file descriptor 2 (where the guard
streams each refusal to the parent) at /dev/null while it reads /etc/passwd (refused,
exception swallowed), puts stderr back, and monkeypatches json.dumps so that the report
the child writes lists no violations; trains normally.

Expected: the refused read is still reported: ``killed``/``violation``.
"""

import json
import os

import torch.nn.functional as F

saved = os.dup(2)
os.dup2(os.open("/dev/null", os.O_WRONLY), 2)
try:
    open("/etc/passwd").read()
except OSError as exc:
    print("read refused:", type(exc).__name__)
finally:
    os.dup2(saved, 2)

_dumps = json.dumps
json.dumps = lambda report, **kw: _dumps({**report, "violations": []}, **kw)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
