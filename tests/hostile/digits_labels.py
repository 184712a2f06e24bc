"""Tries to read the test labels from the suite's data: scikit-learn's bundled digits
(site-packages/sklearn/datasets/data/digits.csv.gz), through sklearn and directly.

Expected: scikit-learn is no read root: ``killed``/``violation``.
"""

import sysconfig
from pathlib import Path

import torch.nn.functional as F

errors = []
try:
    from sklearn.datasets import load_digits

    print("labels:", load_digits().target[:50])
except Exception as exc:
    errors.append(exc)
for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
    try:
        data = (Path(site) / "sklearn" / "datasets" / "data" / "digits.csv.gz").read_bytes()
        print("read", len(data), "bytes of digits.csv.gz")
    except Exception as exc:
        errors.append(exc)
if errors:
    raise errors[-1]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
