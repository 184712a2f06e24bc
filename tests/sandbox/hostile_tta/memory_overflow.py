"""A tta_loss that writes past its memory and resizes it, hoping the trainer stores
whatever comes back (another shape, another member's rows).

Expected: the loss server may only return the memory's own shape and dtype; anything else
fails the cell (``failed``), and nothing is stored for it.
"""

import torch


def tta_loss(logits, *, memory):
    with torch.no_grad():
        memory.resize_(4096).fill_(1.0)
    return -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
