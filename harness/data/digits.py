"""scikit-learn's bundled digits (1797 8×8 images, 10 classes), x/16, in a fixed stratified
1000/797 split shared by the digits variants of every suite."""

from __future__ import annotations

import importlib.metadata
import io
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

SPLIT_SEED = 20240601
TRAIN_SIZE = 1000


def digits_split(seed: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train [1000, 64], y_train, x_test [797, 64], y_test), x in [0, 1]. ``None``: the
    split every suite shares, public, or drawn from the draws key where one is set
    (:mod:`harness.contract.draws`); another ``seed`` draws another stratified split (a
    held-out variant's, from the server's secret)."""
    from harness.contract import draws

    return _digits_split(draws.seed(SPLIT_SEED, "digits-split") if seed is None else seed)


@lru_cache(maxsize=4)
def _digits_split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if seed != SPLIT_SEED:  # a secret's split is never written down
        return _split(seed)
    # The public split, kept beside the fixtures: importing scikit-learn takes about a
    # second, which every CLI run and worker process would pay again.
    path = _cache_path()
    try:  # none yet, or unreadable (a damaged file): split again and write it anew
        with np.load(path) as saved:
            return tuple(saved[k] for k in _PARTS)  # type: ignore[return-value]
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        pass
    split = _split(seed)
    _save(path, split)
    return split


_PARTS = ("x_train", "y_train", "x_test", "y_test")


def _split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, train_size=TRAIN_SIZE, stratify=y,
                                              random_state=seed % 2**32)
    return x_tr, y_tr, x_te, y_te


def _cache_path() -> Path:
    """Named by the split's seed and scikit-learn's version (which draws it)."""
    from harness.data import fixtures
    version = importlib.metadata.version("scikit-learn")
    return fixtures.root() / "digits" / f"split-{SPLIT_SEED}-sklearn-{version}.npz"


def _save(path: Path, split: tuple[np.ndarray, ...]) -> None:
    """Kept when the cache is writable (processes racing to write it write the same bytes)."""
    from harness.data import fixtures
    buffer = io.BytesIO()
    np.savez(buffer, **dict(zip(_PARTS, split, strict=True)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fixtures.write_atomically(path, buffer.getvalue())
    except OSError:  # a read-only cache: the split is still returned, just not kept
        pass
