"""Returns a NaN loss from the first step on.

Expected: divergence is a result, not a crash: status ``diverged`` (existing behaviour).
"""

import torch.nn.functional as F


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none") * float("nan")
