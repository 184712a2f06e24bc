"""Real-data loaders on tiny fixture files written in the real on-disk formats (no network)."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.data.real import (
    CIFAR10N_KEYS,
    CIFAR10N_LABEL_KEYS,
    ArrayDataset,
    DatasetMissing,
    load_cifar10,
    load_cifar10n_labels,
    load_mnist,
)

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- fixture writers (real formats)
def _write_idx_images(path: Path, images: np.ndarray) -> None:
    n, h, w = images.shape
    path.write_bytes(struct.pack(">iiii", 2051, n, h, w) + images.astype(np.uint8).tobytes())


def _write_idx_labels(path: Path, labels: np.ndarray) -> None:
    path.write_bytes(struct.pack(">ii", 2049, len(labels)) + labels.astype(np.uint8).tobytes())


def make_mnist(root: Path, n_train: int = 20, n_test: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {
        "train_x": rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "train_y": (np.arange(n_train) * 3 % 10).astype(np.uint8),
        "test_x": rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "test_y": (np.arange(n_test)[::-1] % 10).astype(np.uint8),
    }
    arrays["train_x"][0, 0, 0], arrays["train_x"][0, 0, 1] = 0, 255  # pin both ends of the scale
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        _write_idx_images(raw / f"{prefix}-images-idx3-ubyte", arrays[f"{split}_x"])
        _write_idx_labels(raw / f"{prefix}-labels-idx1-ubyte", arrays[f"{split}_y"])
    return arrays


def _dump(path: Path, obj: object) -> None:
    with path.open("wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def make_cifar10(root: Path, per_batch: int = 4, n_test: int = 6) -> dict[str, np.ndarray]:
    """5 train batches + test batch + batches.meta, dict keys as bytes like the real pickles."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    xs, ys = [], []
    for b in range(1, 6):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [(b * 7 + i) % 10 for i in range(per_batch)]
        _dump(folder / f"data_batch_{b}",
              {b"batch_label": f"training batch {b} of 5".encode(), b"labels": labels,
               b"data": data, b"filenames": [b"x.png"] * per_batch})
        xs.append(data)
        ys += labels
    test_x = rng.integers(0, 256, size=(n_test, 3072), dtype=np.uint8)
    test_y = [i % 10 for i in range(n_test)]
    _dump(folder / "test_batch", {b"batch_label": b"testing batch 1 of 1", b"labels": test_y,
                                  b"data": test_x, b"filenames": [b"t.png"] * n_test})
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse",
             b"ship", b"truck"]
    _dump(folder / "batches.meta",
          {b"num_cases_per_batch": per_batch, b"label_names": names, b"num_vis": 3072})
    return {"train_x": np.concatenate(xs), "train_y": np.array(ys), "test_x": test_x,
            "test_y": np.array(test_y)}


def make_cifar10n(path: Path, n: int = 50_000, **overrides: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    rng = np.random.default_rng(2)
    labels = {k: rng.integers(0, 10, size=n).astype(np.int64) for k in CIFAR10N_LABEL_KEYS}
    labels.update(overrides)
    torch.save(labels, path)
    return labels


# ---------------------------------------------------------------- MNIST
def test_mnist_roundtrip(tmp_path: Path) -> None:
    want = make_mnist(tmp_path)
    ds = load_mnist(tmp_path)
    assert isinstance(ds, ArrayDataset) and ds.name == "mnist" and ds.num_classes == 10
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (10, 1, 28, 28)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    np.testing.assert_allclose(ds.x_train[:, 0], want["train_x"] / 255.0, rtol=0, atol=1e-7)
    np.testing.assert_allclose(ds.x_test[:, 0], want["test_x"] / 255.0, rtol=0, atol=1e-7)
    assert ds.x_train[0, 0, 0, 0] == 0.0 and ds.x_train[0, 0, 0, 1] == 1.0
    np.testing.assert_array_equal(ds.y_train, want["train_y"])
    np.testing.assert_array_equal(ds.y_test, want["test_y"])
    flat = ds.flat()
    assert flat.x_train.shape == (20, 784) and ds.input_shape == (1, 28, 28)


def test_mnist_missing_names_dir_and_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissing) as err:
        load_mnist(tmp_path)
    msg = str(err.value)
    assert str(tmp_path / "MNIST" / "raw") in msg
    assert "train-images-idx3-ubyte" in msg and "t10k-labels-idx1-ubyte" in msg
    assert "--download" in msg
    assert isinstance(err.value, FileNotFoundError)


def test_mnist_partially_missing_lists_only_missing(tmp_path: Path) -> None:
    make_mnist(tmp_path)
    (tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetMissing, match="t10k-labels-idx1-ubyte") as err:
        load_mnist(tmp_path)
    assert "train-images-idx3-ubyte" not in str(err.value)


# ---------------------------------------------------------------- CIFAR-10
def test_cifar10_roundtrip_and_batch_order(tmp_path: Path) -> None:
    want = make_cifar10(tmp_path)
    ds = load_cifar10(tmp_path)
    assert ds.name == "cifar10" and ds.num_classes == 10 and ds.class_names[9] == "truck"
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (6, 3, 32, 32)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    expect = want["train_x"].reshape(-1, 3, 32, 32) / 255.0
    np.testing.assert_allclose(ds.x_train, expect, rtol=0, atol=1e-7)
    np.testing.assert_allclose(ds.x_test, want["test_x"].reshape(-1, 3, 32, 32) / 255.0,
                               rtol=0, atol=1e-7)
    # labels concatenated data_batch_1..5 in order
    np.testing.assert_array_equal(ds.y_train, want["train_y"])
    np.testing.assert_array_equal(ds.y_train[:4], [7, 8, 9, 0])
    np.testing.assert_array_equal(ds.y_train[-4:], [5, 6, 7, 8])
    np.testing.assert_array_equal(ds.y_test, want["test_y"])


def test_cifar10_channel_planes(tmp_path: Path) -> None:
    """Row layout is 1024 R, then 1024 G, then 1024 B values, each plane row-major 32x32."""
    want = make_cifar10(tmp_path)
    ds = load_cifar10(tmp_path)
    row = want["train_x"][0]
    assert ds.x_train[0, 1, 0, 0] == np.float32(row[1024] / 255.0)
    assert ds.x_train[0, 2, 1, 3] == np.float32(row[2048 + 32 + 3] / 255.0)


def test_cifar10_missing_names_dir_and_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissing) as err:
        load_cifar10(tmp_path)
    msg = str(err.value)
    assert str(tmp_path / "cifar-10-batches-py") in msg
    assert "data_batch_1" in msg and "test_batch" in msg and "batches.meta" in msg
    assert "--download" in msg


def test_cifar10_one_batch_missing(tmp_path: Path) -> None:
    make_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DatasetMissing, match="data_batch_3"):
        load_cifar10(tmp_path)


def test_cifar10_malformed_batch(tmp_path: Path) -> None:
    make_cifar10(tmp_path)
    _dump(tmp_path / "cifar-10-batches-py" / "data_batch_2",
          {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
    with pytest.raises(ValueError, match="data_batch_2"):
        load_cifar10(tmp_path)


# ---------------------------------------------------------------- CIFAR-10N
def test_cifar10n_keys_and_values(tmp_path: Path) -> None:
    path = tmp_path / "CIFAR-10_human.pt"
    want = make_cifar10n(path)
    for short, key in CIFAR10N_KEYS.items():
        got = load_cifar10n_labels(path, key)
        assert got.dtype == np.int64 and got.shape == (50_000,)
        np.testing.assert_array_equal(got, want[key])
        np.testing.assert_array_equal(load_cifar10n_labels(path, short), want[key])
    np.testing.assert_array_equal(load_cifar10n_labels(path), want["aggre_label"])
    np.testing.assert_array_equal(load_cifar10n_labels(path, "clean_label"), want["clean_label"])


def test_cifar10n_expected_len(tmp_path: Path) -> None:
    path = tmp_path / "small.pt"
    want = make_cifar10n(path, n=20)
    got = load_cifar10n_labels(path, "worse_label", expected_len=20)
    np.testing.assert_array_equal(got, want["worse_label"])
    with pytest.raises(ValueError, match="expected 50000 labels"):
        load_cifar10n_labels(path)
    with pytest.raises(ValueError, match="expected 21 labels"):
        load_cifar10n_labels(path, expected_len=21)


def test_cifar10n_wrong_key_lists_valid_keys(tmp_path: Path) -> None:
    path = tmp_path / "CIFAR-10_human.pt"
    make_cifar10n(path, n=10)
    with pytest.raises(KeyError) as err:
        load_cifar10n_labels(path, "noisy_label", expected_len=10)
    msg = str(err.value)
    assert "noisy_label" in msg
    for key in CIFAR10N_LABEL_KEYS:
        assert key in msg


@pytest.mark.parametrize("bad", [10, -1])
def test_cifar10n_label_out_of_range(tmp_path: Path, bad: int) -> None:
    path = tmp_path / "CIFAR-10_human.pt"
    labels = np.zeros(10, np.int64)
    labels[4] = bad
    make_cifar10n(path, n=10, aggre_label=labels)
    with pytest.raises(ValueError, match=r"outside \[0, 9\]"):
        load_cifar10n_labels(path, expected_len=10)


def test_cifar10n_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "CIFAR-10_human.pt"
    with pytest.raises(DatasetMissing, match="CIFAR-10_human.pt") as err:
        load_cifar10n_labels(path)
    assert str(path) in str(err.value)


def test_cifar10n_numpy1_pickle_names_load(tmp_path: Path) -> None:
    """The released file was pickled under numpy 1.x (`numpy.core.multiarray._reconstruct`)."""
    import torch

    path = tmp_path / "old.pt"
    want = {k: np.arange(10, dtype=np.int64) % 10 for k in CIFAR10N_LABEL_KEYS}
    torch.save(want, path, _use_new_zipfile_serialization=False)  # raw protocol-2 pickle
    blob = path.read_bytes()
    assert b"numpy._core.multiarray" in blob
    path.write_bytes(blob.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    got = load_cifar10n_labels(path, "random2", expected_len=10)
    np.testing.assert_array_equal(got, want["random_label2"])


class _NotAnArray:
    pass


def test_cifar10n_refuses_arbitrary_objects(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "evil.pt"
    torch.save({"aggre_label": _NotAnArray()}, path)
    with pytest.raises(ValueError, match="refusing to load.*_NotAnArray"):
        load_cifar10n_labels(path)


# ---------------------------------------------------------------- import cost
def test_import_does_not_pull_torch() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ("import sys, harness.data.real; "
            "print('torch' in sys.modules, 'torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"]
