"""Fakes an "ok" cell after crashing: finds its work directory through /proc/self/cwd and
the trainer's model and inputs through the interpreter's frames, writes its own
outputs.npz there (all-zero weights and the all-zero predictions they make, of the right
shapes), raises, and monkeypatches json.dumps so that the result the child writes says no
error, a wall time of 1 ms and perfect metrics.

Expected: whatever the report says, metrics come from the parent's judge and the wall
time from the parent's clock: an ``ok`` cell scored as the zero model it returned (~10%).
"""

import json
import os
import sys

import numpy as np

WORKDIR = os.readlink("/proc/self/cwd")
_dumps = json.dumps


def _forged(result, **kw):
    result = {k: v for k, v in result.items() if k not in ("error", "reason")}
    return _dumps({**result, "info": {"mode": "vmap", "wall_time": 0.001},
                   "metrics": {"test_acc": 1.0}}, **kw)


def _find(name):
    frame = sys._getframe()
    while frame is not None:
        if name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(name)


def classification_loss(logits, targets):
    inputs, plan, model = _find("inputs"), _find("plan"), _find("model")
    epochs, members = _find("config").epochs, len(plan["seeds"])
    params = {f"param:{name}": np.zeros((members, *p.shape), np.float32)
              for name, p in model.named_parameters()}
    np.savez(os.path.join(WORKDIR, "outputs.npz"), **params,
             eval_predictions=np.zeros((epochs, members, len(inputs["x_eval"])), np.int64),
             loss_curve=np.zeros((members, epochs), np.float32),
             grad_norm_curve=np.zeros((members, epochs), np.float32),
             diverged_step=np.full(members, -1, np.int64))
    json.dumps = _forged
    raise RuntimeError("crashed, but the report will say otherwise")
