"""Run without the Python guard: writes a file in /tmp and a module into the repository.

Expected: Landlock answers EACCES: ``failed``, reason ``objective``; neither file exists.
"""

from pathlib import Path

import torch.nn.functional as F

ESCAPE = Path("__HOSTILE_ESCAPE__")
REPO = Path("__HOSTILE_REPO__")

errors = []
for target in (ESCAPE, REPO / "__HOSTILE_MARKER__.py"):
    try:
        target.write_text("escaped\n")
    except OSError as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
