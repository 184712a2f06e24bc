"""A tta_loss that looks for the stream's labels in its process's heap: any integer array
as long as the digits pool (797) or a whole stream, through gc.get_objects.

Expected: with the guard, walking the heap is refused and ends the server
(``killed``/``violation``); without it (kernel layers only), the loss server was never
given a label, so it finds none and adapts like TENT (``ok``).
"""

import gc

import numpy as np
import torch

found = sum(1 for o in gc.get_objects() if isinstance(o, np.ndarray | torch.Tensor)
            and o.dtype in (np.int64, torch.int64) and o.ndim >= 1 and o.shape[-1] >= 797)
print(f"heap walked: label_like_arrays={found}", flush=True)


def tta_loss(logits):
    return -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
