"""Run without the Python guard: makes result.json a symlink to a victim file outside the
sandbox and outputs.npz a symlink to /dev/zero (an endless file), and stops numpy.savez
from replacing the latter; trains normally.

Expected: a loss server writes no report or outputs file (its answers go over its pipe)
and the worker reads nothing from its work directory, so neither link is followed: the
cell is ``ok`` and scores as plain cross-entropy, the victim unchanged.
"""

import os

import numpy as np
import torch.nn.functional as F

VICTIM = "__HOSTILE_VICTIM__"

os.symlink(VICTIM, "result.json")
os.symlink("/dev/zero", "outputs.npz")
np.savez = lambda *args, **kw: None


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
