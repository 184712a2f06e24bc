"""Tries to carry the test set out through what it may print and raise: asks for every
context its hook may have (``progress``, ``state``) and, for every call, prints what it
was given (each tensor's shape and dtype, the targets, a digest of the logits; the first
calls' tensors in full), looking for anything the size of the test set. One way per case
(``__HOSTILE_PARAM__``):

- ``output``: prints on every call and trains as plain cross-entropy;
- ``error``: at its 5th call raises an error whose text holds every tensor it was given
  so far, in full (an error is shown to its owner, like output).

Expected: a loss server is sent nothing but its member's batches: every request holds
tensors of at most ``batch_size`` rows (logits of the training inputs, never of the test
inputs, which the worker evaluates itself), one epoch's requests add up to the training
set, and the targets it saw are that member's training labels. ``output``: the cell is
``ok`` and scores as plain cross-entropy. ``error``: ``failed``/``objective`` with its
dump in the error, which holds five batches and nothing else.
"""

import hashlib

import torch
import torch.nn.functional as F

WAY = "__HOSTILE_PARAM__"
calls = 0
dump = []
torch.set_printoptions(profile="full")


def _describe(name, t):
    return f"{name}={tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"


def classification_loss(logits, targets, *, progress, state):
    global calls
    calls += 1
    digest = hashlib.sha256(logits.detach().numpy().tobytes()).hexdigest()[:16]
    print(f"call {calls}: rows={logits.shape[0]} {_describe('logits', logits)} "
          f"{_describe('targets', targets)} {_describe('state', state)} "
          f"progress={progress:.4f} logits_digest={digest}", flush=True)
    print(f"targets {calls}: {targets.tolist()}", flush=True)
    full = f"call {calls} logits:\n{logits.detach()}\ntargets:\n{targets}\nstate:\n{state}"
    if calls <= 3:
        print(full, flush=True)
    dump.append(full)
    if WAY == "error" and calls == 5:
        raise RuntimeError("everything I was given:\n" + "\n".join(dump))
    return F.cross_entropy(logits, targets, reduction="none")
