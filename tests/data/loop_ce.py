"""Cross-entropy written with a Python branch on a tensor value: not vmappable (loop mode)."""
import torch.nn.functional as F


def classification_loss(logits, targets):
    loss = F.cross_entropy(logits, targets, reduction="none")
    if float(loss.detach().mean()) > 1e9:  # data-dependent control flow: vmap refuses float()
        return loss * 0
    return loss
