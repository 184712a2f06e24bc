"""Writes a raw pickle (not an .npz archive) as outputs.npz, by monkeypatching numpy.savez;
unpickling it would create a marker file outside the sandbox.

Expected: ``failed``, reason ``invalid-output`` (not an .npz archive); the marker is
never created.
"""

import pickle

import numpy as np
import torch.nn.functional as F

MARKER = "__HOSTILE_PICKLE_MARKER__"


class Payload:
    def __reduce__(self):
        return (open, (MARKER, "w"))


def _poisoned(path, **outputs):
    with open(path, "wb") as f:
        f.write(pickle.dumps({"eval_predictions": Payload()}))


np.savez = _poisoned


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
