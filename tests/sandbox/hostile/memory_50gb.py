"""Allocates 50 GB (and touches it) inside the loss, one way per case
(``__HOSTILE_PARAM__``):

- ``traced``: the hook is made of tensors only, so it is traced into a graph (on fake
  tensors: nothing is allocated in the server) that the worker would run itself;
- ``per_call``: a data-dependent branch (``.item()``) keeps it from being traced, so its
  server runs it on every call.

Expected: ``traced``: the worker checks the graph's sizes on meta tensors before its
first call, will not run a 50,000,000,000-element intermediate itself (nothing is
allocated) and serves the hook per call instead. Then, as for ``per_call``: the
address-space limit (or the memory cgroup) refuses the allocation in the server:
``killed``, reason ``memory``.
"""

import torch
import torch.nn.functional as F


def classification_loss(logits, targets):
    if "__HOSTILE_PARAM__" == "per_call" and logits.sum().item() > float("-inf"):
        pass  # a branch on a value: not traceable
    hoard = torch.ones(50 * 10**9, dtype=torch.uint8)
    return F.cross_entropy(logits, targets, reduction="none") + hoard[0]
