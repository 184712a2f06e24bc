"""Writes outside its work directory, one way per case (``__HOSTILE_PARAM__``): a file in
/tmp, a module into the repository (which the worker would import), a directory, or a
copy of its own source (shutil.copyfile).

Expected: the guard refuses the write and that refusal ends the child:
``killed``/``violation`` naming the target; the file does not exist afterwards.
(Without the guard, kernel_write_outside: Landlock refuses.)
"""

import os
import shutil
from pathlib import Path

import torch.nn.functional as F

ESCAPE = Path("__HOSTILE_ESCAPE__")
REPO = Path("__HOSTILE_REPO__")
MARKER = "__HOSTILE_MARKER__"

attempt = {
    "tmp_file": lambda: ESCAPE.write_text("escaped"),
    "repo_module": lambda: (REPO / f"{MARKER}.py").write_text("print('owned')\n"),
    "directory": lambda: os.makedirs(f"{ESCAPE}.d"),
    "copyfile": lambda: shutil.copyfile(__file__, f"{ESCAPE}.copy"),
}["__HOSTILE_PARAM__"]
attempt()
print("still running after the attempt", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
