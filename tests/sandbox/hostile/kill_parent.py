"""Signals the worker, one target per case (``__HOSTILE_PARAM__``): SIGKILL to its parent,
to the test process's pid, to a canary process the test started, to its own process group
(os.killpg) or to every process it may (kill -1).

Expected: refused by the guard, which ends the child (``killed``/``violation``: signalling
a process, os.kill or os.killpg); the PID namespace and Landlock's signal scoping make
those pids unreachable anyway (kernel_signals); the worker and canary live on.
"""

import os
import signal

import torch.nn.functional as F

TEST_PID = int("__HOSTILE_TEST_PID__")
CANARY_PID = int("__HOSTILE_CANARY_PID__")

attempt = {
    "parent": lambda: os.kill(os.getppid(), signal.SIGKILL),
    "test_pid": lambda: os.kill(TEST_PID, signal.SIGKILL),
    "canary": lambda: os.kill(CANARY_PID, signal.SIGKILL),
    "killpg": lambda: os.killpg(0, signal.SIGKILL),
    "everyone": lambda: os.kill(-1, signal.SIGKILL),
}["__HOSTILE_PARAM__"]
attempt()
print("still running after the attempt", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
