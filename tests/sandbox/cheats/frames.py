"""Cheat without a forbidden action: ``sys._getframe`` is not refused, and in the previous
protocol it reached the trainer's locals (its data set, the test inputs, every member's
labels) from inside the hook. This walks every frame above the hook and every module,
looking for tensors or arrays the size of a data set (500 rows or more), and would
train on anything that looks like a labelled data set.

Expected: the server holds nothing but its own batch (it prints ``found nothing``) and it
trains as plain cross-entropy: the same score as CE.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

seen = {"done": False}


def _big(value):
    if not isinstance(value, torch.Tensor | np.ndarray):  # no getattr on strangers
        return False
    return value.ndim > 0 and value.shape[0] >= 500


def _look():
    found = []
    frame = sys._getframe(1)
    while frame is not None:
        found += [f"{frame.f_code.co_name}.{k}" for k, v in frame.f_locals.items() if _big(v)]
        frame = frame.f_back
    for name, module in list(sys.modules.items()):
        found += [f"{name}.{k}" for k, v in list(vars(module).items()) if _big(v)]
    print("found " + (", ".join(found) if found else "nothing"), flush=True)


def classification_loss(logits, targets):
    if not seen["done"]:
        seen["done"] = True
        _look()
    return F.cross_entropy(logits, targets, reduction="none")
