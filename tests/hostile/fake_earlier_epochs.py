"""Fakes the earlier epochs only: wraps the suite's train_members in its own process so that
every epoch's test predictions but the last come from a 1-nearest-neighbour classifier on
the training set (~0.98 on digits), while the last epoch's predictions and the returned
weights are the honest ones (the parent recomputes the last epoch from the weights).

Expected: the final test accuracy is the honest model's; ideally the best-epoch metric
would be too, but earlier epochs' predictions are the trainer's word (a documented limit).
"""

import torch
import torch.nn.functional as F

from suites.noisy_labels import pipeline as protocol

_train_members = protocol.train_members


def _earlier_epochs_forged(member_loss, params, batches, config, **kw):
    result = _train_members(member_loss, params, batches, config, **kw)
    x, labels = batches.shared["x"], batches.own["y"]
    eval_inputs = _find("x_eval")
    nearest = torch.cdist(eval_inputs, x).argmin(dim=1)
    knn = labels[:, nearest].to(result.evaluations.dtype)  # [M, N_eval]
    result.evaluations[:-1] = knn[None]
    return result


def _find(name):
    import sys

    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(name)


protocol.train_members = _earlier_epochs_forged


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
