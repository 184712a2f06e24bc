"""Replaces the trainer's outputs with an object array whose pickle runs code on load:
monkeypatches numpy.savez, which the sandboxed child uses to write outputs.npz.

Expected: the parent loads outputs with allow_pickle=False: ``failed``, reason
``invalid-output``, and the payload (creating a marker file outside) never runs.
"""

import numpy as np
import torch.nn.functional as F

MARKER = "__HOSTILE_PICKLE_MARKER__"


class Payload:
    def __reduce__(self):
        return (open, (MARKER, "w"))


_savez = np.savez


def _poisoned(path, **outputs):
    outputs["eval_predictions"] = np.array([Payload()], dtype=object)
    _savez(path, **outputs)


np.savez = _poisoned


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
