"""Fakes the earlier epochs only: wraps the suite's train_members in its own process so
that every epoch's test predictions but the last come from a 1-nearest-neighbour
classifier on the training set (~0.98 on digits), the last epoch's staying honest (the
judge used to recompute only the last epoch from the weights, so best_test_acc and
best_epoch were the trainer's word). From inside its hook it looks for the test inputs
in the frames above it; trains as plain cross-entropy (two epochs).

Expected: the trainer runs in the worker, which makes every epoch's predictions itself:
the wrapper is never called, no frame holds the test inputs (it prints that it found
none), and the cell is ``ok`` with every metric, best_test_acc and best_epoch included,
those of plain cross-entropy.
"""

import sys

import torch
import torch.nn.functional as F

from suites.noisy_labels import pipeline as protocol

_train_members = protocol.train_members
calls = {"wrapper": 0, "hook": 0}


def _earlier_epochs_forged(member_loss, params, batches, config, **kw):
    calls["wrapper"] += 1
    result = _train_members(member_loss, params, batches, config, **kw)
    x, labels = batches.shared["x"], batches.own["y"]
    nearest = torch.cdist(_find("x_eval"), x).argmin(dim=1)
    result.evaluations[:-1] = labels[:, nearest].to(result.evaluations.dtype)[None]
    return result


def _find(name):
    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(name)


protocol.train_members = _earlier_epochs_forged


def classification_loss(logits, targets):
    calls["hook"] += 1
    if calls["hook"] == 1:
        try:
            found = f"x_eval of {len(_find('x_eval'))} rows"
        except LookupError:
            found = "no x_eval"
        print(f"found {found}; wrapper called {calls['wrapper']} times", flush=True)
    return F.cross_entropy(logits, targets, reduction="none")
