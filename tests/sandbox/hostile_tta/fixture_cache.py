"""A tta_adjust that reads the suite's fixture cache on the worker's disk (where the
source models and the corrupted pool live), hoping for something of the judge's there.

Expected: the cache is outside the work directory: the guard refuses the first look
(``killed``/``violation``); kernel layers alone: the directory does not exist in the
sandbox's root, so it finds nothing (``ok``, "cache: missing").
"""

import os

ROOT = "__TTA_FIXTURES__"
try:
    names = os.listdir(ROOT)
    print(f"cache: {names}", flush=True)
except OSError as exc:
    print(f"cache: missing ({type(exc).__name__})", flush=True)


def tta_adjust(probs, features):
    return probs
