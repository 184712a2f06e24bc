"""Signals the worker: SIGKILL to its parent, to the test process's pid, to a canary process
the test started, to its own process group and to every process it may (kill -1).

Expected: refused by the guard (and the PID namespace and Landlock's signal scoping make
those pids unreachable anyway): ``killed``/``violation``; the worker and canary live on.
"""

import os
import signal

import torch.nn.functional as F

TEST_PID = int("__HOSTILE_TEST_PID__")
CANARY_PID = int("__HOSTILE_CANARY_PID__")

attempts = [
    lambda: os.kill(os.getppid(), signal.SIGKILL),
    lambda: os.kill(TEST_PID, signal.SIGKILL),
    lambda: os.kill(CANARY_PID, signal.SIGKILL),
    lambda: os.killpg(0, signal.SIGKILL),
    lambda: os.kill(-1, signal.SIGKILL),
]
errors = []
for attempt in attempts:
    try:
        attempt()
    except Exception as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
