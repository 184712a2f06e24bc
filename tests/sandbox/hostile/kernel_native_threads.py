"""Run without the Python guard, under a 64-process limit: starts up to 512 threads from
native code (pthread_create through ctypes, each running libc's sleep(1)), below anything
Python's threading module sees; then trains normally.

Expected: the job's pids cgroup counts native threads too: pthread_create fails with
EAGAIN near the limit; the cell then trains normally (``ok``).
"""

import ctypes
import time

import torch.nn.functional as F

libc = ctypes.CDLL(None, use_errno=True)
sleep = ctypes.cast(libc.sleep, ctypes.c_void_p)  # void *(*)(void *) is close enough
thread = ctypes.c_ulong()
started, error = 0, 0
for _ in range(512):
    error = libc.pthread_create(ctypes.byref(thread), None, sleep, ctypes.c_void_p(1))
    if error:
        break
    started += 1
print(f"native threads started: {started}; pthread_create returned {error}")
time.sleep(1.5)  # let them end before training


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
