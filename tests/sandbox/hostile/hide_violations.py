"""Hides its violation from the guard's report pipe (descriptor 4, which the objective can
reach), one way per case (``__HOSTILE_PARAM__``), then reads /etc/passwd (swallowing the
exception) and trains:

- ``junk``: writes 64 KiB without a newline into the report pipe first, so that the
  guard's line comes after everything the worker keeps of a report;
- ``devnull``: points descriptor 4 at /dev/null;
- ``closed``: closes descriptor 4.

Expected: the refusal ends the server whatever became of its report (nothing after it
runs): the guard's exit status alone makes the cell ``killed``/``violation``, and the
error says that a forbidden action was attempted whose report was hidden. The isolation
record is the worker's.
"""

import os

import torch.nn.functional as F

WAY = "__HOSTILE_PARAM__"
if WAY == "junk":
    os.write(4, b"x" * 65536)
elif WAY == "devnull":
    os.dup2(os.open("/dev/null", os.O_WRONLY), 4)
else:
    os.close(4)

try:
    open("/etc/passwd").read()
except OSError:
    pass
print("still running after the refusal", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
