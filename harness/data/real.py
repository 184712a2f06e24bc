"""Opt-in loaders for real datasets (MNIST, CIFAR-10 and the CIFAR-10N human labels).

Nothing here is needed by the embedded default suites. Module import stays cheap:
only numpy and the standard library are imported at top level; torch/torchvision are imported
inside the functions that need them.

File formats read:

* MNIST (through ``torchvision.datasets.MNIST``): ``<root>/MNIST/raw/`` holding the four
  uncompressed IDX files ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
  ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``. IDX = big-endian int32 magic
  (2051 images / 2049 labels), big-endian int32 dims, then a uint8 payload.
* CIFAR-10 (own reader, no md5 check): ``<root>/cifar-10-batches-py/`` holding the python pickles
  ``data_batch_1`` .. ``data_batch_5``, ``test_batch`` (dicts with ``b"data"``: uint8 [N, 3072],
  row-major R, G, B planes of 32x32; ``b"labels"``: list[int]) and ``batches.meta``
  (``b"label_names"``: list[bytes]). Train order is data_batch_1..5 (CIFAR-10N is aligned to it).
* CIFAR-10N: ``CIFAR-10_human.pt``, a ``torch.save``'d dict of numpy int arrays of length 50000
  with keys ``clean_label, aggre_label, worse_label, random_label1/2/3``.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ArrayDataset",
    "CIFAR10N_KEYS",
    "CIFAR10N_LABEL_KEYS",
    "DatasetMissing",
    "MNIST_FILES",
    "CIFAR10_FILES",
    "load_cifar10",
    "load_cifar10n_labels",
    "load_mnist",
]

MNIST_FILES: tuple[str, ...] = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES: tuple[str, ...] = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_FILES: tuple[str, ...] = (*CIFAR10_TRAIN_BATCHES, "test_batch", "batches.meta")

#: Short variant name -> key in ``CIFAR-10_human.pt``.
CIFAR10N_KEYS: dict[str, str] = {
    "aggre": "aggre_label",
    "random1": "random_label1",
    "random2": "random_label2",
    "random3": "random_label3",
    "worst": "worse_label",
}
#: All keys of the released CIFAR-10N label file.
CIFAR10N_LABEL_KEYS: tuple[str, ...] = ("clean_label", *CIFAR10N_KEYS.values())
CIFAR10N_TRAIN_SIZE = 50_000


class DatasetMissing(FileNotFoundError):
    """Raised when dataset files are absent and downloading was not requested."""


@dataclass(frozen=True)
class ArrayDataset:
    """In-memory train/test split. ``x_*``: float32 in [0, 1], image shape kept ([N, C, H, W]);
    ``y_*``: int64 class indices."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str
    class_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.x_train) != len(self.y_train) or len(self.x_test) != len(self.y_test):
            raise ValueError(f"{self.name}: number of inputs and labels differ")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. (1, 28, 28)."""
        return tuple(self.x_train.shape[1:])

    def flat(self) -> ArrayDataset:
        """Copy with inputs reshaped to [N, prod(input_shape)] (for MLPs)."""
        return dataclasses.replace(
            self,
            x_train=self.x_train.reshape(len(self.x_train), -1),
            x_test=self.x_test.reshape(len(self.x_test), -1),
        )


def _missing(directory: Path, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if not (directory / n).is_file()]


def _missing_error(what: str, directory: Path, missing: list[str], how: str) -> DatasetMissing:
    return DatasetMissing(
        f"{what} not found: expected files {', '.join(missing)} in directory {directory}. "
        f"{how}"
    )


def _to_unit(images: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(images, dtype=np.float32) / np.float32(255.0)


def load_mnist(root: str | Path, *, download: bool = False) -> ArrayDataset:
    """MNIST 60k/10k as [N, 1, 28, 28] float32 in [0, 1], read by ``torchvision.datasets.MNIST``
    from the uncompressed IDX files in ``<root>/MNIST/raw/`` (see module docstring)."""
    root = Path(root)
    raw = root / "MNIST" / "raw"
    missing = _missing(raw, MNIST_FILES)
    if missing and not download:
        raise _missing_error(
            "MNIST", raw, missing,
            f"Run with --download (download=True), or place the uncompressed IDX files "
            f"(gunzipped from the official *.gz) at {raw}/.",
        )
    from torchvision.datasets import MNIST

    parts = [MNIST(str(root), train=t, download=download) for t in (True, False)]
    xs = [_to_unit(p.data.numpy()[:, None]) for p in parts]
    ys = [p.targets.numpy().astype(np.int64) for p in parts]
    return ArrayDataset(xs[0], ys[0], xs[1], ys[1], num_classes=10, name="mnist",
                        class_names=tuple(str(i) for i in range(10)))


def _unpickle(path: Path) -> dict[Any, Any]:
    with path.open("rb") as fh:
        obj = pickle.load(fh, encoding="bytes")
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a pickled dict, got {type(obj).__name__}")
    return obj


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch -> (uint8 [N, 3, 32, 32], int64 [N])."""
    batch = _unpickle(path)
    if b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{path}: not a CIFAR-10 batch (keys {sorted(batch)})")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise ValueError(f"{path}: data {data.shape} / labels {labels.shape} malformed")
    return data.reshape(-1, 3, 32, 32), labels


def _download_cifar10(root: Path) -> None:
    from torchvision.datasets import CIFAR10
    from torchvision.datasets.utils import download_and_extract_archive

    download_and_extract_archive(CIFAR10.url, str(root), filename=CIFAR10.filename,
                                 md5=CIFAR10.tgz_md5)


def load_cifar10(root: str | Path, *, download: bool = False) -> ArrayDataset:
    """CIFAR-10 50k/10k as [N, 3, 32, 32] float32 in [0, 1] from the python-pickle batches in
    ``<root>/cifar-10-batches-py/``; train order = data_batch_1..5 (see module docstring).
    torchvision is only used (for the download, md5-checked) when ``download=True``."""
    root = Path(root)
    folder = root / CIFAR10_DIR
    missing = _missing(folder, CIFAR10_FILES)
    if missing and download:
        _download_cifar10(root)
        missing = _missing(folder, CIFAR10_FILES)
    if missing:
        raise _missing_error(
            "CIFAR-10", folder, missing,
            f"Run with --download (download=True), or extract cifar-10-python.tar.gz "
            f"(python version, https://www.cs.toronto.edu/~kriz/cifar.html) into {root}/.",
        )
    train = [_read_cifar_batch(folder / b) for b in CIFAR10_TRAIN_BATCHES]
    x_test, y_test = _read_cifar_batch(folder / "test_batch")
    names = tuple(n.decode() if isinstance(n, bytes) else str(n)
                  for n in _unpickle(folder / "batches.meta").get(b"label_names", []))
    num_classes = len(names) or 10
    y_train = np.concatenate([y for _, y in train])
    for y in (y_train, y_test):
        if y.size and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"{folder}: labels outside [0, {num_classes - 1}]")
    return ArrayDataset(_to_unit(np.concatenate([x for x, _ in train])), y_train,
                        _to_unit(x_test), y_test, num_classes=num_classes, name="cifar10",
                        class_names=names)


def _numpy_safe_globals() -> list[Any]:
    """The globals a pickled numpy array needs, under numpy-1 and numpy-2 module names."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    out: list[Any] = [np.ndarray, np.dtype]
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out.append((_reconstruct, f"{mod}._reconstruct"))
    dtypes = getattr(np, "dtypes", None)  # numpy >= 1.25 may pickle dtype classes
    if dtypes is not None:
        out += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith("DType")]
    return out


def _safe_torch_load(path: Path) -> Any:
    import torch

    try:
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        culprit = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        detail = culprit.group(1) if culprit else str(exc).splitlines()[-1]
        raise ValueError(
            f"{path}: refusing to load; it holds objects other than numpy/torch arrays "
            f"(weights-only unpickling rejected {detail})"
        ) from exc


def load_cifar10n_labels(
    path: str | Path, key: str = "aggre_label", *, expected_len: int | None = None
) -> np.ndarray:
    """Human labels from CIFAR-10N's ``CIFAR-10_human.pt`` (torch.save'd dict of numpy int
    arrays, aligned with the data_batch_1..5 train order). ``key`` is a full key (e.g.
    ``"worse_label"``) or a short name from ``CIFAR10N_KEYS`` (e.g. ``"worst"``). Loaded with
    weights-only unpickling (numpy array types allow-listed). Returns int64 [expected_len]
    (default 50000) with values in [0, 9]."""
    path = Path(path)
    if not path.is_file():
        raise DatasetMissing(
            f"CIFAR-10N label file not found: expected {path}. Get CIFAR-10_human.pt from "
            f"https://github.com/UCSC-REAL/cifar-10-100n (data/) and place it there."
        )
    obj = _safe_torch_load(path)
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a dict of label arrays, got {type(obj).__name__}")
    full = CIFAR10N_KEYS.get(key, key)
    if full not in obj:
        raise KeyError(
            f"{path}: no label key {key!r}; valid keys: {', '.join(sorted(map(str, obj)))} "
            f"(short names: {', '.join(CIFAR10N_KEYS)})"
        )
    labels = np.asarray(obj[full])
    want = CIFAR10N_TRAIN_SIZE if expected_len is None else expected_len
    if labels.ndim != 1 or len(labels) != want:
        raise ValueError(f"{path}[{full!r}]: expected {want} labels, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{path}[{full!r}]: labels must be integers, got {labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(
            f"{path}[{full!r}]: labels outside [0, 9] (min {labels.min()}, max {labels.max()})"
        )
    return labels.astype(np.int64)
