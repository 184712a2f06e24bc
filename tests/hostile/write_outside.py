"""Writes outside its work directory: a file in /tmp, a module into the repository (which
the worker would import), a directory, and a copy of its own source.

Expected: refused (guard and Landlock): ``killed``/``violation``; none of the files exists
afterwards.
"""

import os
import shutil
from pathlib import Path

import torch.nn.functional as F

ESCAPE = Path("__HOSTILE_ESCAPE__")
REPO = Path("__HOSTILE_REPO__")
MARKER = "__HOSTILE_MARKER__"

attempts = [
    lambda: ESCAPE.write_text("escaped"),
    lambda: (REPO / f"{MARKER}.py").write_text("print('owned')\n"),
    lambda: os.makedirs(f"{ESCAPE}.d"),
    lambda: shutil.copyfile(__file__, f"{ESCAPE}.copy"),
]
errors = []
for attempt in attempts:
    try:
        attempt()
    except Exception as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
