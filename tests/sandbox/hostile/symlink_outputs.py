"""Symlink attack: makes outputs.npz and result.json symlinks to a file outside the sandbox
(a victim file the test owns, standing in for /etc/shadow), so that the child's final write
- or the parent's read - follows them.

Expected: the symlinks are refused: ``killed``/``violation``; the victim is unchanged.
"""

import os

import torch.nn.functional as F

VICTIM = "__HOSTILE_VICTIM__"

for name in ("outputs.npz", "result.json"):
    os.symlink(VICTIM, name)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
