"""An unlearning_loss that reads the suite's fixture cache on the worker's disk, where each
seed's retain model lives (the model forget quality is measured against), to train towards
it directly.

Expected: the cache is outside the work directory: the guard refuses the first look
(``killed``/``violation``); kernel layers alone: the directory does not exist in the
sandbox's root, so it finds nothing (``ok``, "cache: missing").
"""

import os

ROOT = "__UNLEARNING_FIXTURES__"
try:
    names = os.listdir(ROOT)
    print(f"cache: {names}", flush=True)
except OSError as exc:
    print(f"cache: missing ({type(exc).__name__})", flush=True)


def unlearning_loss(forget, retain):
    return forget.seq_logprobs.mean()
