"""Looks for test labels in the memory it inherited (children may be forked from a server
that has the harness imported): sklearn in sys.modules and the digits cache (printed
first, flushed), then - through gc.get_objects - any integer array of the test set's or
whole dataset's length; if it found labels, it would predict with them.

Expected: with the guard, walking the heap is refused and ends the child
(``killed``/``violation``: gc.get_objects); without it (the @kernel case), nothing of the
judge's was ever loaded where the child comes from: it finds nothing and trains normally
(``ok``).
"""

import gc
import sys

import numpy as np
import torch.nn.functional as F

from harness.data import digits as data

modules = sorted(n for n in sys.modules if n.split(".")[0] in ("sklearn", "scipy", "webapp"))
cached = data._digits_split.cache_info().currsize
print(f"FOUND modules={modules} cached={cached}", flush=True)
arrays = [o for o in gc.get_objects() if isinstance(o, np.ndarray)
          and o.dtype.kind in "iu" and o.shape in [(797,), (1797,)]]
print(f"heap walked: label_like_arrays={len(arrays)}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
