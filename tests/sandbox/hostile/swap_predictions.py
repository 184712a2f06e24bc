"""Replaces the test predictions with a 1-nearest-neighbour classifier on the training set
(~0.98 on digits): wraps the suite's train_members in its own process, as it did when
the sandbox ran the trainer, and, from inside its hook, walks the frames above it for
the trainer's test inputs (``x_eval``) and training inputs to predict with. Prints what
it found; trains as plain cross-entropy.

Expected: the trainer runs in the worker: the wrapper is never called and no frame above
the hook holds the test or training inputs (it prints that it found nothing). The cell
is ``ok`` and scores as plain cross-entropy, its predictions made by the worker from the
trained weights.
"""

import sys

import torch
import torch.nn.functional as F

from suites.noisy_labels import pipeline as protocol

_train_members = protocol.train_members
state = {"wrapper called": 0, "looked": False}


def _nearest_neighbour(member_loss, params, batches, config, **kw):
    state["wrapper called"] += 1
    result = _train_members(member_loss, params, batches, config, **kw)
    x, labels = batches.shared["x"], batches.own["y"]
    nearest = torch.cdist(_find("x_eval"), x).argmin(dim=1)
    result.evaluations[:] = labels[:, nearest][None].to(result.evaluations.dtype)
    return result


def _find(name):
    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(name)


protocol.train_members = _nearest_neighbour


def classification_loss(logits, targets):
    if not state["looked"]:
        state["looked"] = True
        found = []
        # The trainer's names (its own server's request tuple, ``inputs``, holds nothing
        # but this batch, and torch.export's own frames have a ``params``: not looked for).
        for name in ("x_eval", "x_train", "batches", "model"):
            try:
                found.append(f"{name}: {type(_find(name)).__name__}")
            except LookupError:
                pass
        print(f"found: {found or 'nothing'}; wrapper called {state['wrapper called']} "
              f"times", flush=True)
    return F.cross_entropy(logits, targets, reduction="none")
