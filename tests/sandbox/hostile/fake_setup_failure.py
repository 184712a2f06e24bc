"""Impersonates the sandbox's own setup failure: exits at once with status 71, the status
the child uses when a requested isolation layer (Landlock, seccomp) cannot be applied,
before writing any report.

Expected: the objective is not the infrastructure: a ``failed``/``crash`` cell ("exited with
status 71 without a result"), never SandboxUnavailable out of run_cells_sandboxed (which a
worker retries with backoff and finally stores as failed/infrastructure, "not caused by the
objective").
"""

import os

import torch.nn.functional as F

os._exit(71)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
