"""Hunts for the worker's secrets in environments: os.environ, /proc/self/environ,
/proc/<ppid>/environ, /proc/1/environ and every /proc/<pid>/environ it can see, and prints
all of it.

Expected: the child's environment is scrubbed and its /proc shows only its own PID
namespace, so nothing of the worker's (HARNESS_TEST_SECRET, DATABASE_URL) is printed.
Reading its own environment is not forbidden: the cell trains normally (``ok``).
"""

import os

import torch.nn.functional as F


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as exc:
        return f"<{type(exc).__name__}: {exc}>"


print("os.environ:", dict(os.environ))
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("pids visible:", pids)
for pid in ["self", os.getppid(), 1, *pids]:
    print(f"/proc/{pid}/environ =>", _read(f"/proc/{pid}/environ"))


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
