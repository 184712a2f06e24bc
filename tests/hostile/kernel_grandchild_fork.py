"""Run without the Python guard: os.fork()s one grandchild that calls setsid() (leaving the
process group) and sleeps 10 minutes in a marker directory; then trains normally.

Expected: the fork works, but the grandchild dies with the cell's PID namespace: status
``ok`` and no process with the marker afterwards.
"""

import os
import time

import torch.nn.functional as F

MARKER = "__HOSTILE_MARKER__"

if os.fork() == 0:
    try:
        os.setsid()
        os.mkdir(MARKER)
        os.chdir(MARKER)
        time.sleep(600)
    finally:
        os._exit(0)
for _ in range(50):
    if os.path.isdir(MARKER):
        break
    time.sleep(0.1)
print("grandchild running:", os.path.isdir(MARKER))


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
