"""Run without the Python guard: SIGKILL to its parent, to the test's pid, to a canary
process the test started, and to pid 1 of its namespace; swallows the errors and trains.

Expected: the PID namespace hides outside pids and Landlock scopes signals: the worker and
canary live on; the cell trains normally (``ok``).
"""

import os
import signal

import torch.nn.functional as F

TARGETS = [os.getppid(), int("__HOSTILE_TEST_PID__"), int("__HOSTILE_CANARY_PID__"), 1]

for pid in [p for p in TARGETS if p > 0]:  # 0 would be its own process group
    try:
        os.kill(pid, signal.SIGKILL)
        print(pid, "signalled")
    except OSError as exc:
        print(pid, "refused:", exc)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
