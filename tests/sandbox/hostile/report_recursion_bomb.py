"""Makes the worker's JSON parser recurse: patches json.dumps so that its first frame (the
hello, where the worker used to read result.json) is 32,000 nested arrays, 64,000 bytes,
under the 64 KiB cap on a reply header.

Expected: the worker treats the header as untrusted input: a header it cannot parse
(RecursionError) breaks the format, ``failed``/``invalid-output``, never an exception
out of run_cells_sandboxed (which a worker would retry as an infrastructure error).
"""

import json

import torch.nn.functional as F

json.dumps = lambda *args, **kw: "[" * 32_000 + "]" * 32_000


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
