"""scikit-learn's bundled digits (1797 8×8 images, 10 classes), x/16, in a fixed stratified
1000/797 split shared by the digits variants of every suite."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SPLIT_SEED = 20240601
TRAIN_SIZE = 1000


@lru_cache(maxsize=4)
def digits_split(seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train [1000, 64], y_train, x_test [797, 64], y_test), x in [0, 1]; another ``seed``
    draws another stratified split (a held-out variant's, from the server's secret)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, train_size=TRAIN_SIZE, stratify=y,
                                              random_state=seed % 2**32)
    return x_tr, y_tr, x_te, y_te
