"""Reads /etc/passwd, a file outside the sandbox's read roots, when the module loads.

Expected: refused (audit-hook guard; Landlock refuses it too): status ``killed``, reason
``violation``, the error names /etc/passwd and the file's content never reaches the output.
"""

import torch.nn.functional as F

with open("/etc/passwd") as f:
    print(f.read())


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
