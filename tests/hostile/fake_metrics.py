"""Fakes perfect metrics from inside: monkeypatches torch.eq, numpy.mean and numpy.equal to
say "all correct", replaces the suite's judge functions in its own process with ones that
report test_acc = 1.0, and adds metrics to its report.

Expected: none of it matters - the parent computes every metric from the predictions with
labels the child never had: status ``ok`` with the real (low, one-epoch) test accuracy.
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


def _boasting(report, **kw):
    return _dumps({**report, "metrics": PERFECT, "test_acc": 1.0}, **kw)


json.dumps = _boasting


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
