"""Reads other cells' work directories: lists the directory its own work directory lives in
(where concurrently running cells have theirs) and reads their inputs and objectives.

Expected: only its own work directory is reachable. Both directories listed are
ancestors of the work directory, which the guard lets the import system list, so it is
Landlock that refuses (EACCES): ``failed``/``objective``; nothing of a sibling leaks.
"""

import os

import torch.nn.functional as F

BASE = "__HOSTILE_SANDBOX_BASE__"

errors = []
for directory in (BASE, os.path.dirname(os.getcwd())):
    try:
        for name in os.listdir(directory):
            sibling = os.path.join(directory, name)
            print(name, os.listdir(sibling))
            with open(os.path.join(sibling, "job.json")) as f:
                print(f.read())
    except OSError as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
