"""The calibration suite's data (suites/calibration/data.py): sizes, determinism, splits
that do not overlap, and shifts that do what they say."""

from __future__ import annotations

import numpy as np
import pytest

from harness.data.digits import digits_split
from suites.calibration import data as cal_data


def test_synthetic_splits_are_the_declared_sizes_stratified_and_disjoint():
    d = cal_data.synthetic()
    assert [len(d.x_train), len(d.x_val), len(d.x_test)] == [12000, 4000, 4000]
    assert d.x_train.shape[1] == 40 and d.x_train.dtype == np.float32
    assert d.y_train.dtype == np.int64 and set(np.unique(d.y_train)) == set(range(10))
    shares = [np.bincount(y, minlength=10) / len(y) for y in (d.y_train, d.y_val, d.y_test)]
    assert np.abs(shares[0] - shares[1]).max() < 0.01 and np.abs(shares[0] - shares[2]).max() < 0.01
    rows = np.concatenate([d.x_train, d.x_val, d.x_test])
    assert len(np.unique(rows, axis=0)) == len(rows)
    # standardized with the training split's statistics
    np.testing.assert_allclose(d.x_train.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(d.x_train.std(axis=0), 1, atol=1e-4)


def test_synthetic_is_the_same_every_time():
    a, b = cal_data.synthetic(), cal_data._synthetic.__wrapped__("public")
    for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_digits_splits_the_projects_test_set_into_validation_and_test():
    d = cal_data.load("digits")
    _, y_tr, x_rest, _ = digits_split()
    assert [len(d.x_train), len(d.x_val), len(d.x_test)] == [1000, 397, 400]
    assert np.array_equal(d.y_train, y_tr)
    joined = np.concatenate([d.x_val, d.x_test])
    assert np.array_equal(np.unique(joined, axis=0), np.unique(x_rest, axis=0))


def test_an_unknown_data_set_is_a_clear_error():
    with pytest.raises(KeyError, match="no calibration data set 'cifar'"):
        cal_data.load("cifar")


def test_noise_shift_has_the_stated_standard_deviation_and_repeats():
    d = cal_data.synthetic()
    assert cal_data.shifted(d, "noise", 0) is d.x_test
    for severity in (0.5, 1.0, 2.0):
        x = cal_data.shifted(d, "noise", severity)
        assert (x - d.x_test).std() == pytest.approx(severity, rel=0.02)
        assert np.array_equal(x, cal_data.shifted(d, "noise", severity))
    assert not np.array_equal(cal_data.shifted(d, "noise", 1.0) - d.x_test,
                              cal_data.shifted(d, "noise", 2.0) - d.x_test)


def test_dropout_shift_replaces_that_share_of_features_by_the_training_mean():
    d = cal_data.load("digits")
    x = cal_data.shifted(d, "dropout", 0.4)
    mean = d.x_train.mean(axis=0)
    changed = x != d.x_test
    assert changed.mean() == pytest.approx(0.4 * (mean != d.x_test).mean(), abs=0.02)
    assert np.array_equal(x[changed], np.broadcast_to(mean, x.shape)[changed])


@pytest.mark.parametrize("kind,severity,message", [
    ("blur", 1.0, "shift must be one of noise, dropout"),
    ("noise", -1.0, "at least 0"),
    ("dropout", 1.5, r"in \[0, 1\]"),
])
def test_a_bad_shift_is_a_clear_error(kind, severity, message):
    with pytest.raises(ValueError, match=message):
        cal_data.shifted(cal_data.load("digits"), kind, severity)
