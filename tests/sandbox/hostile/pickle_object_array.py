"""Leaves an object array whose pickle runs code on load where the worker used to read the
trainer's outputs: monkeypatches numpy.savez (which the sandboxed child no longer calls)
and writes outputs.npz (an object array) and result.json (a pickle) into its work
directory itself; unpickling either would create a marker file outside the sandbox.
Trains as plain cross-entropy.

Expected: a loss server returns no files: nothing of its work directory is read (the
directory is removed with the server), the payload never runs and the marker never
exists; the cell is ``ok`` and scores as plain cross-entropy.
"""

import pickle

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
_poisoned("outputs.npz", loss_curve=np.zeros(1))
with open("result.json", "wb") as f:
    f.write(pickle.dumps({"metrics": Payload()}))


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
