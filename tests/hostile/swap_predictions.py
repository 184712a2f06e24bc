"""Replaces what the trainer returns: wraps the suite's train_members in its own process so
that the test predictions come from a 1-nearest-neighbour classifier on the training set
(not from the protocol's model trained with this loss), and trains as usual otherwise.

Expected: the parent recomputes the last epoch's predictions from the returned weights,
and the swapped ones disagree with them: ``failed``/``invalid-output``.
"""

import torch
import torch.nn.functional as F

from suites.noisy_labels import pipeline as protocol

_train_members = protocol.train_members


def _nearest_neighbour(member_loss, params, batches, config, **kw):
    result = _train_members(member_loss, params, batches, config, **kw)
    x, labels = batches.shared["x"], batches.own["y"]
    eval_inputs = _find("x_eval")
    nearest = torch.cdist(eval_inputs, x).argmin(dim=1)
    knn = labels[:, nearest]  # [M, N_eval]
    result.evaluations[:] = knn[None].to(result.evaluations.dtype)
    return result


def _find(name):
    import sys

    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(name)


protocol.train_members = _nearest_neighbour


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
