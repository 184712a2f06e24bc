"""Run without the Python guard: reads /etc/passwd, to show the kernel alone refuses it.

Expected: Landlock answers EACCES: ``failed``, reason ``objective``, PermissionError naming
/etc/passwd; no content leaks.
"""

import torch.nn.functional as F

with open("/etc/passwd") as f:
    print(f.read())


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
