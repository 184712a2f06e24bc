"""Fakes perfect metrics from inside: monkeypatches torch.eq, numpy.mean and numpy.equal to
say "all correct", replaces the suite's judge functions (protocol.judge_member,
NoisyLabels.judge) in its own process with ones that report test_acc = 1.0, and patches
json.dumps so that every reply header it sends carries perfect metrics too.

Expected: none of it reaches the worker: its server only answers hook calls, the suite's
judge runs in the worker, and a reply header is read for its verdict alone. The cell is
``ok`` and scores as plain cross-entropy (a low one-epoch accuracy), computed from the
trained weights.
"""

import json

import numpy as np
import torch
import torch.nn.functional as F

from suites.noisy_labels import pipeline as protocol

PERFECT = {"test_acc": 1.0, "best_test_acc": 1.0, "train_acc_clean": 1.0}

torch.eq = lambda a, b, **kw: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
np.mean = lambda *args, **kw: 1.0
np.equal = lambda a, b, *args, **kw: np.ones_like(np.asarray(a), dtype=bool)
protocol.judge_member = lambda *args, **kw: PERFECT
protocol.NoisyLabels.judge = lambda *args, **kw: PERFECT
_dumps = json.dumps


def _boasting(header, **kw):
    if isinstance(header, dict):
        header = {**header, "metrics": PERFECT, "test_acc": 1.0}
    return _dumps(header, **kw)


json.dumps = _boasting


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
