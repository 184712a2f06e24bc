"""Allocates 50 GB (and touches it) inside the loss.

Expected: the address-space limit refuses the allocation: ``killed``, reason ``memory``.
"""

import torch
import torch.nn.functional as F


def classification_loss(logits, targets):
    hoard = torch.ones(50 * 10**9, dtype=torch.uint8)
    return F.cross_entropy(logits, targets, reduction="none") + hoard[0]
