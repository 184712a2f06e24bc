"""The calibration suite's data: a generated 10-class problem (the headline), digits, and
test inputs under shift.

Generated (``synthetic``): ``make_classification(n_samples=20000, n_features=40,
n_informative=20, n_classes=10, n_clusters_per_class=2, class_sep=1.0, flip_y=0.05)``
with a fixed dataset seed, split stratified 12000/4000/4000 into train, validation (for
post-hoc maps and the judge's temperature) and test, features standardized with the
training split's mean and standard deviation. The 5% flipped labels give irreducible
ambiguity, so a network trained to overfit becomes overconfident (PROTOCOLS §4.6).

Digits: scikit-learn's bundled digits (x/16), the project's fixed 1000/797 split with its
797 test samples split stratified 397/400 into validation and test. Too small and too
easy for miscalibration to show much; kept as the second variant for that reason.

Shift (``shifted``): the test inputs only, never the training or validation ones —
calibration under shift with the temperature fitted on clean validation data (Ovadia et
al. 2019). Additive Gaussian noise of standard deviation ``severity`` (in units of a
feature's training standard deviation) or feature dropout (each feature zeroed, i.e. set
to its training mean, with probability ``severity``), from a fixed seed per (kind,
severity) so every objective sees the same shifted inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

DATASET_SEED = 20261201
SPLIT_SEED = 20261202
SIZES = (12000, 4000, 4000)
SHIFT_KINDS = ("noise", "dropout")


@dataclass(frozen=True)
class Splits:
    x_train: np.ndarray  # [N, D] float32
    y_train: np.ndarray  # [N] int64
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    scale: np.ndarray  # [D] the training split's per-feature standard deviation (the unit
    # of the noise shift; 1 for standardized features)


def _split_seed() -> int:
    """The splits' and shifts' seed: public, or drawn from the draws key where one is set
    (:mod:`harness.contract.draws`)."""
    from harness.contract import draws

    return draws.seed(SPLIT_SEED, "calibration-split")


def synthetic() -> Splits:
    """The headline data set (deterministic: the same arrays on every machine)."""
    from harness.contract import draws

    return _synthetic(draws.fingerprint())


@lru_cache(maxsize=2)
def _synthetic(_draws: str) -> Splits:  # one per draws key: a keyed split is another split
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    x, y = make_classification(n_samples=sum(SIZES), n_features=40, n_informative=20,
                               n_classes=10, n_clusters_per_class=2, class_sep=1.0,
                               flip_y=0.05, random_state=DATASET_SEED)
    train, val, test = SIZES
    x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, train_size=train, stratify=y,
                                                  random_state=_split_seed())
    x_va, x_te, y_va, y_te = train_test_split(x_rest, y_rest, train_size=val, test_size=test,
                                              stratify=y_rest, random_state=_split_seed())
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)

    def standard(a: np.ndarray) -> np.ndarray:
        return ((a - mean) / std).astype(np.float32)

    return Splits(standard(x_tr), y_tr.astype(np.int64), standard(x_va), y_va.astype(np.int64),
                  standard(x_te), y_te.astype(np.int64), 10, np.ones(x.shape[1], np.float32))


def digits() -> Splits:
    """Digits: the project's 1000 training samples; its 797 test samples as 397/400."""
    from harness.contract import draws

    return _digits(draws.fingerprint())


@lru_cache(maxsize=2)
def _digits(_draws: str) -> Splits:  # one per draws key: a keyed split is another split
    from sklearn.model_selection import train_test_split

    from harness.data.digits import digits_split

    x_tr, y_tr, x_rest, y_rest = digits_split()
    x_va, x_te, y_va, y_te = train_test_split(x_rest, y_rest, train_size=397, stratify=y_rest,
                                              random_state=_split_seed())
    return Splits(x_tr, y_tr, x_va, y_va, x_te, y_te, 10, x_tr.std(axis=0).astype(np.float32))


def cifar10(root: str | None = None, download: bool = False) -> Splits:
    """CIFAR-10 (opt-in, real data): the 50000 training images split 45000/5000 into
    train and validation with a fixed seed (Mukhoti et al.'s ``valid_size=0.1``), the
    10000 test images; [N, 3, 32, 32] in [0, 1]. Read from ``root`` (see
    harness/data/real.py), downloaded only with ``download``."""
    from sklearn.model_selection import train_test_split

    from harness.data import data_root
    from harness.data.real import load_cifar10

    ds = load_cifar10(data_root(root), download=download)
    x_tr, x_va, y_tr, y_va = train_test_split(ds.x_train, ds.y_train, test_size=0.1,
                                              stratify=ds.y_train, random_state=_split_seed())
    return Splits(x_tr, y_tr, x_va, y_va, ds.x_test, ds.y_test, ds.num_classes,
                  x_tr.std(axis=0).astype(np.float32))


DATASETS = {"synthetic": synthetic, "digits": digits, "cifar10": cifar10}


def load(name: str, root: str | None = None, download: bool = False) -> Splits:
    if name not in DATASETS:
        raise KeyError(f"no calibration data set {name!r}; known: {', '.join(DATASETS)}")
    return cifar10(root, download) if name == "cifar10" else DATASETS[name]()


def shifted(data: Splits, kind: str, severity: float) -> np.ndarray:
    """The test inputs under shift ``kind`` at ``severity`` (0: unchanged), [N, D] float32."""
    if kind not in SHIFT_KINDS:
        raise ValueError(f"shift must be one of {', '.join(SHIFT_KINDS)}, not {kind!r}")
    if kind == "noise" and severity < 0:
        raise ValueError("a noise severity is a standard deviation: at least 0")
    if kind == "dropout" and not 0 <= severity <= 1:
        raise ValueError("a dropout severity is a probability: in [0, 1]")
    if severity == 0:
        return data.x_test
    rng = np.random.default_rng([_split_seed(), SHIFT_KINDS.index(kind), round(severity * 1000)])
    if kind == "noise":
        noise = rng.standard_normal(data.x_test.shape) * data.scale * severity
        return (data.x_test + noise).astype(np.float32)
    keep = rng.random(data.x_test.shape) >= severity
    mean = data.x_train.mean(axis=0)
    return np.where(keep, data.x_test, mean).astype(np.float32)
