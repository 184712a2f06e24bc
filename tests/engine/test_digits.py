"""The public digits split (harness/data/digits.py): its shapes, determinism, stratified
partition, and the copy kept beside the fixtures (docs/fixtures.md)."""

import numpy as np

from harness.data.digits import _digits_split, digits_split


def test_digits_split_shapes_range_and_determinism():
    x_tr, y_tr, x_te, y_te = digits_split()
    assert x_tr.shape == (1000, 64) and x_te.shape == (797, 64)
    assert y_tr.shape == (1000,) and y_te.shape == (797,)
    assert x_tr.dtype == np.float32 and y_tr.dtype == np.int64
    for x in (x_tr, x_te):
        assert x.min() >= 0.0 and x.max() <= 1.0
    assert x_tr.max() == 1.0
    _digits_split.cache_clear()
    again = digits_split()
    for a, b in zip((x_tr, y_tr, x_te, y_te), again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_public_split_is_kept_on_disk_and_read_back_exactly(tmp_path, monkeypatch):
    from harness.data import digits

    monkeypatch.setenv("HARNESS_FIXTURES", str(tmp_path))
    _digits_split.cache_clear()
    fresh = digits._split(digits.SPLIT_SEED)  # scikit-learn's draw, no cache involved
    try:
        written = digits_split()
        [path] = (tmp_path / "digits").iterdir()  # no temporary file left
        assert path.name.startswith(f"split-{digits.SPLIT_SEED}-sklearn-")
        _digits_split.cache_clear()
        read = digits_split()
        digits_split(7)  # another split (a held-out secret's) is never written
        assert list((tmp_path / "digits").iterdir()) == [path]
        path.write_bytes(b"not an npz")  # unreadable: drawn again and rewritten
        _digits_split.cache_clear()
        again = digits_split()
        path.write_bytes(path.read_bytes()[:1000])  # a damaged archive: the same
        _digits_split.cache_clear()
        mended = digits_split()
        for got in (written, read, again, mended):
            for a, b in zip(got, fresh, strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
        assert np.load(path)["y_test"].shape == (797,)
    finally:
        _digits_split.cache_clear()


def test_digits_split_stratified_partition():
    from sklearn.datasets import load_digits

    x_tr, y_tr, x_te, y_te = digits_split()
    full = load_digits()
    total = np.bincount(full.target, minlength=10)
    for y, size in ((y_tr, 1000), (y_te, 797)):
        expected = total * size / len(full.target)
        assert np.all(np.abs(np.bincount(y, minlength=10) - expected) <= 1)

    # train ∪ test is exactly the dataset (as a multiset of (x, y) rows): nothing shared, lost
    def rows(x, y):
        r = np.column_stack([np.rint(x * 16), y]).astype(np.int64)
        return r[np.lexsort(r.T[::-1])]

    both = rows(np.vstack([x_tr, x_te]), np.concatenate([y_tr, y_te]))
    np.testing.assert_array_equal(both, rows(full.data / 16.0, full.target))
