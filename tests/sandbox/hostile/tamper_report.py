"""Fakes an "ok" cell after crashing. There is no report file any more: the verdict on each
hook call is the server's reply header, written with ``json.dumps`` and ``os.write``,
which live in the objective's own interpreter. Its hook first looks for the trainer's
model and inputs in its frames (to forge all-zero weights as before), finds none, and
crashes; it has patched ``json.dumps`` so that the error reply says something else
(``__HOSTILE_PARAM__``):

- ``forged_ok``: ``{"ok": true}`` with perfect metrics and a wall time of 1 ms, and
  ``os.write`` so that a payload of the right size follows it (a loss of 0 and zero
  gradients): a well-formed answer to every call;
- ``no_verdict``: perfect metrics and a wall time only, neither ``ok`` nor ``error``.

Expected: the worker takes nothing from a reply but its verdict and the bytes it sized
itself; metrics come from its judge and the wall time from its clock. ``forged_ok``: an
``ok`` cell scored as what it answered (zero gradients: the untrained model, about one
digit in ten). ``no_verdict``: a reply that breaks the format, ``failed``/
``invalid-output``, no metrics.
"""

import json
import os
import sys

import torch.nn.functional as F

WAY = "__HOSTILE_PARAM__"
_dumps, _write = json.dumps, os.write
FORGED = {"metrics": {"test_acc": 1.0, "best_test_acc": 1.0}, "wall_time": 0.001,
          "info": {"mode": "vmap", "wall_time": 0.001}}
pending = {"payload": b"", "gradient_bytes": 0}


def _find(name):
    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(f"{name} is in none of my frames")


def _forged_dumps(obj, **kw):
    if isinstance(obj, dict) and "error" in obj:
        if WAY == "forged_ok":
            # the loss (float64 0.0), then d loss / d logits (float32 zeros)
            pending["payload"] = bytes(8 + pending["gradient_bytes"])
            return _dumps({"ok": True, **FORGED}, **kw)
        return _dumps(FORGED, **kw)
    return _dumps(obj, **kw)


def _forged_write(fd, data):
    written = _write(fd, data)
    if fd == 3 and pending["payload"] and written == len(data):
        payload, pending["payload"] = pending["payload"], b""
        view = memoryview(payload)
        while view:
            view = view[_write(3, view):]
    return written


def classification_loss(logits, targets):
    pending["gradient_bytes"] = logits.numel() * logits.element_size()
    json.dumps, os.write = _forged_dumps, _forged_write
    inputs, model = _find("inputs"), _find("model")
    print("found the trainer's", type(inputs), type(model), flush=True)
    return F.cross_entropy(logits, targets, reduction="none")
