"""Tries to read the test labels from the suite's data, scikit-learn's bundled digits
(site-packages/sklearn/datasets/data/digits.csv.gz), one way per case
(``__HOSTILE_PARAM__``): through sklearn.datasets.load_digits, or reading the file.

Expected: scikit-learn is no read root: the first read under it is refused and ends the
child, ``killed``/``violation`` naming a path under site-packages/sklearn.
"""

import sysconfig
from pathlib import Path

import torch.nn.functional as F

if "__HOSTILE_PARAM__" == "import":
    from sklearn.datasets import load_digits

    print("labels:", load_digits().target[:50], flush=True)
else:
    data = (Path(sysconfig.get_paths()["purelib"]) / "sklearn" / "datasets" / "data"
            / "digits.csv.gz").read_bytes()
    print("read", len(data), "bytes of digits.csv.gz", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
