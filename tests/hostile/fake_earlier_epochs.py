"""Fakes the earlier epochs only: wraps the suite's train_members in its own process so that
every epoch's test predictions but the last come from a 1-nearest-neighbour classifier on
the training set (~0.98 on digits), while the last epoch's predictions and the returned
weights are the honest ones (the parent recomputes the last epoch from the weights).

Expected: the final test accuracy is the honest model's; ideally the best-epoch metric
would be too, but earlier epochs' predictions are the trainer's word (a documented limit).
"""

import torch
import torch.nn.functional as F

from suites.noisy_labels import protocol

_train_members = protocol.train_members


def _earlier_epochs_forged(model, loss_fn, x, labels, seeds, proto, *, eval_inputs, **kw):
    result = _train_members(model, loss_fn, x, labels, seeds, proto,
                            eval_inputs=eval_inputs, **kw)
    nearest = torch.cdist(eval_inputs, x).argmin(dim=1)
    knn = labels[:, nearest].to(result.eval_predictions.dtype)  # [M, N_eval]
    result.eval_predictions[:-1] = knn[None]
    return result


protocol.train_members = _earlier_epochs_forged


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
