"""A memory bomb that runs outside the sandbox: its hook is made of tensors only, so it is
traced once in its server and the graph then runs in the worker (harness/sandbox/traced.py). The
worker refuses any single intermediate over 4 M elements per member, but a graph may
have 4,000 nodes: this one builds, from its logits, a chain of 24 tensors of exactly
4 M float32 elements (16 MiB each, every one under the cap) and adds a zero multiple of
the last to plain cross-entropy. Running the graph keeps every intermediate until the
call ends: 256 MiB of them, and more for autograd, held by the worker per member per
call, none of it in the sandbox's memory cgroup (at 4,000 nodes: 64 GiB per member).

Expected: the worker does not grow by what an objective's graph asks for (the same bound
as for the reply bombs, 256 MiB); the cell scores as plain cross-entropy.
"""

import torch
import torch.nn.functional as F

LINKS = 23
SIDE = 2048  # 2048 × 2048 = 4 M elements: the largest intermediate the worker allows


def classification_loss(logits, targets):
    x = logits.mean()
    chain = torch.ones(SIDE, SIDE) * x
    for _ in range(LINKS):
        chain = chain + x
    return F.cross_entropy(logits, targets) + chain.mean() * 0.0
