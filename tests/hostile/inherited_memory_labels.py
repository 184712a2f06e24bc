"""Looks for test labels in the memory it inherited (children may be forked from a server
that has the harness imported): sklearn in sys.modules, the digits cache, any integer array
of the test set's or whole dataset's length, and if it found labels, predicts with them.

Expected: nothing of the judge's was ever loaded where the child comes from: it finds
nothing, trains normally (``ok``) and scores a real one-epoch accuracy.
"""

import gc
import sys

import numpy as np
import torch.nn.functional as F

from suites.noisy_labels import data

modules = sorted(n for n in sys.modules if n.split(".")[0] in ("sklearn", "scipy", "webapp"))
cached = data.digits_split.cache_info().currsize
arrays = [o for o in gc.get_objects()
          if isinstance(o, np.ndarray) and o.dtype.kind in "iu" and o.shape in [(797,), (1797,)]]
print(f"FOUND modules={modules} cached={cached} label_like_arrays={len(arrays)}")


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
