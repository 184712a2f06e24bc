"""Makes result.json and outputs.npz FIFOs (a parent that opens them would block forever)
and tries a device node.

Expected: Landlock refuses making FIFOs and devices: a clear failed cell, promptly.
"""

import os
import stat

import torch.nn.functional as F

errors = []
for attempt in (lambda: os.mkfifo("result.json"), lambda: os.mkfifo("outputs.npz"),
                lambda: os.mknod("null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))):
    try:
        attempt()
    except OSError as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
