"""The noisy-labels suite's noise generators (suites/noisy_labels/noise.py) and its noisy-label
draw. Stream seeds are tested in tests/engine/test_seeding.py, the digits split in
tests/engine/test_digits.py."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from harness.contract.registry import get_suite
from suites.noisy_labels import noise
from suites.noisy_labels.pipeline import load_dataset, noisy_labels


def balanced(n: int, k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % k).astype(np.int64)


def sigma(p: float, n: int) -> float:
    return float(np.sqrt(p * (1 - p) / n))


# --- symmetric_exact ---------------------------------------------------------------

@pytest.mark.parametrize("rate", [0.2, 0.333, 0.4, 0.6, 0.8, 0.97])
def test_symmetric_exact_rate_and_per_class_count(rate):
    n, k = 1000, 10
    y = balanced(n, k)
    noisy = noise.symmetric_exact(y, rate, k, np.random.default_rng(1))
    per_class = int(int(rate * n) / k)
    assert noise.realized_rate(y, noisy) == per_class * k / n
    for c in range(k):
        assert np.sum((y == c) & (noisy != y)) == per_class


def test_symmetric_exact_known_rates():
    y = balanced(1000, 10)
    # int(333) / 10 -> 33 per class -> 330 flips, not 333
    assert noise.realized_rate(y, noise.symmetric_exact(y, 0.333, 10, np.random.default_rng(0))) \
        == 0.33
    assert noise.realized_rate(y, noise.symmetric_exact(y, 0.4, 10, np.random.default_rng(0))) \
        == 0.4


def test_symmetric_exact_never_keeps_true_class_and_reaches_all_others():
    k = 5
    y = balanced(5000, k)
    noisy = noise.symmetric_exact(y, 0.8, k, np.random.default_rng(2))
    # exactly int(4000/5) = 800 chosen per class, and every chosen sample changed class
    assert np.sum(noisy != y) == 4000
    for c in range(k):
        targets = noisy[(y == c) & (noisy != y)]
        assert c not in targets
        assert set(np.unique(targets)) == set(range(k)) - {c}
    assert noisy.dtype == y.dtype
    assert noisy.min() >= 0 and noisy.max() < k


def test_symmetric_exact_deterministic_per_seed():
    y = balanced(1000, 10)
    a = noise.symmetric_exact(y, 0.4, 10, np.random.default_rng(7))
    b = noise.symmetric_exact(y, 0.4, 10, np.random.default_rng(7))
    c = noise.symmetric_exact(y, 0.4, 10, np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_symmetric_exact_rate_zero_and_input_untouched():
    y = balanced(1000, 10)
    before = y.copy()
    np.testing.assert_array_equal(noise.symmetric_exact(y, 0.0, 10, np.random.default_rng(0)), y)
    noise.symmetric_exact(y, 0.6, 10, np.random.default_rng(0))
    np.testing.assert_array_equal(y, before)


# --- asymmetric --------------------------------------------------------------------

def test_asymmetric_only_mapped_sources_change_to_their_targets():
    y = balanced(20_000, 10)
    noisy = noise.asymmetric(y, 0.4, noise.MNIST_ASYMMETRIC, np.random.default_rng(0))
    changed = noisy != y
    assert set(np.unique(y[changed])) == set(noise.MNIST_ASYMMETRIC)
    for source, target in noise.MNIST_ASYMMETRIC.items():
        assert set(np.unique(noisy[(y == source) & changed])) == {target}
    for c in (0, 1, 4, 8, 9):
        np.testing.assert_array_equal(noisy[y == c], c)


def test_asymmetric_map_is_the_mnist_one():
    assert noise.MNIST_ASYMMETRIC == {7: 1, 2: 7, 5: 6, 6: 5, 3: 8}


def test_asymmetric_rate_one_swaps_five_and_six_without_chaining():
    y = balanced(1000, 10)
    noisy = noise.asymmetric(y, 1.0, noise.MNIST_ASYMMETRIC, np.random.default_rng(0))
    expected = np.array([noise.MNIST_ASYMMETRIC.get(int(c), int(c)) for c in y])
    np.testing.assert_array_equal(noisy, expected)
    np.testing.assert_array_equal(noisy[y == 5], 6)  # 5→6 is not followed by 6→5
    np.testing.assert_array_equal(noisy[y == 6], 5)


def test_asymmetric_per_class_share_is_binomial_around_rate():
    n, rate = 100_000, 0.3
    y = balanced(n, 10)
    noisy = noise.asymmetric(y, rate, noise.MNIST_ASYMMETRIC, np.random.default_rng(3))
    for source in noise.MNIST_ASYMMETRIC:
        members = y == source
        share = np.mean(noisy[members] != source)
        assert abs(share - rate) < 4 * sigma(rate, int(members.sum())), (source, share)
    assert np.all(noisy[~np.isin(y, list(noise.MNIST_ASYMMETRIC))]
                  == y[~np.isin(y, list(noise.MNIST_ASYMMETRIC))])


def test_asymmetric_deterministic_and_rate_zero():
    y = balanced(5000, 10)
    a = noise.asymmetric(y, 0.4, noise.MNIST_ASYMMETRIC, np.random.default_rng(5))
    b = noise.asymmetric(y, 0.4, noise.MNIST_ASYMMETRIC, np.random.default_rng(5))
    c = noise.asymmetric(y, 0.4, noise.MNIST_ASYMMETRIC, np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(
        noise.asymmetric(y, 0.0, noise.MNIST_ASYMMETRIC, np.random.default_rng(5)), y)


# --- instance_dependent ------------------------------------------------------------

def uniform_features(n: int, d: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, d))


@pytest.mark.parametrize("rate", [0.4, 0.05])
def test_idn_realized_rate_matches_truncnorm_mean(rate):
    n, k, std = 20_000, 10, 0.1
    x = uniform_features(n)
    y = balanced(n, k)
    noisy = noise.instance_dependent(x, y, rate, k, np.random.default_rng(11))
    # marginally each label flips with probability E[q], q ~ TruncNormal(rate, 0.1, [0, 1])
    mean_q = stats.truncnorm.mean((0 - rate) / std, (1 - rate) / std, loc=rate, scale=std)
    if rate == 0.05:
        assert mean_q > 0.09  # the truncation at 0 matters here
    realized = noise.realized_rate(y, noisy)
    assert abs(realized - mean_q) < 4 * sigma(mean_q, n), (realized, mean_q)


def test_idn_flips_never_to_true_class_labels_in_range():
    n, k = 5000, 10
    y = balanced(n, k)
    noisy = noise.instance_dependent(uniform_features(n), y, 0.5, k, np.random.default_rng(0))
    assert noisy.dtype == y.dtype
    assert noisy.min() >= 0 and noisy.max() < k
    # flipped == label differs; check each class's flips cover only other classes
    for c in range(k):
        assert c not in noisy[(y == c) & (noisy != y)]
    assert 0.4 < noise.realized_rate(y, noisy) < 0.6


def test_idn_depends_on_x():
    n, k = 2000, 10
    y = balanced(n, k)
    a = noise.instance_dependent(uniform_features(n, seed=1), y, 0.4, k, np.random.default_rng(3))
    b = noise.instance_dependent(uniform_features(n, seed=2), y, 0.4, k, np.random.default_rng(3))
    same = noise.instance_dependent(uniform_features(n, seed=1), y, 0.4, k,
                                    np.random.default_rng(3))
    np.testing.assert_array_equal(a, same)
    assert not np.array_equal(a, b)
    # same q and u per sample, so the difference is where a flip lands
    both = (a != y) & (b != y)
    assert np.mean(a[both] != b[both]) > 0.3


def test_idn_rate_near_zero_flips_nothing():
    n, k = 5000, 10
    y = balanced(n, k)
    noisy = noise.instance_dependent(uniform_features(n), y, 1e-6, k, np.random.default_rng(0),
                                     norm_std=1e-7)
    np.testing.assert_array_equal(noisy, y)


def test_idn_identical_samples_follow_q_times_softmax():
    """N copies of one (x, y) share a = x·W[y]; with q pinned (tiny norm_std) the noisy labels
    are i.i.d. Categorical(P), P[y] = 1 - q, P[k≠y] = q·softmax(a)[k]. W is reproduced from an
    identically seeded Generator after the same truncnorm draw."""
    n, k, d, rate, seed = 20_000, 10, 64, 0.5, 4
    x1 = np.linspace(0.0, 1.0, d)
    x = np.tile(x1, (n, 1))
    y = np.full(n, 3, dtype=np.int64)
    noisy = noise.instance_dependent(x, y, rate, k, np.random.default_rng(seed), norm_std=1e-6)

    rng = np.random.default_rng(seed)
    q = stats.truncnorm.rvs(-rate / 1e-6, (1 - rate) / 1e-6, loc=rate, scale=1e-6, size=n,
                            random_state=rng)
    assert np.allclose(q, rate, atol=1e-4)
    w = rng.standard_normal((k, d, k))
    a = x1 @ w[3]
    a[3] = -np.inf
    p = rate * np.exp(a - a.max()) / np.exp(a - a.max()).sum()
    p[3] = 1 - rate
    counts = np.bincount(noisy, minlength=k)
    for c in range(k):
        tol = 4 * sigma(p[c], n) + 1e-12
        assert abs(counts[c] / n - p[c]) <= tol, (c, counts[c] / n, p[c])
    # and the most frequent wrong label is the argmax of x·W[y]
    wrong = counts.copy()
    wrong[3] = -1
    assert wrong.argmax() == np.argmax(a)


def test_idn_flips_favor_argmax_class_on_digits_scale():
    """Per-sample W[y] scores: the share of flips landing on argmax_{k≠y}(x·W[y])_k matches
    the mean softmax mass of that class among flipped samples and far exceeds 1/(K-1)."""
    n, k, d, rate, seed = 20_000, 10, 64, 0.4, 9
    x = uniform_features(n, d, seed=5)
    y = balanced(n, k)
    noisy = noise.instance_dependent(x, y, rate, k, np.random.default_rng(seed))

    rng = np.random.default_rng(seed)
    stats.truncnorm.rvs(-rate / 0.1, (1 - rate) / 0.1, loc=rate, scale=0.1, size=n,
                        random_state=rng)
    w = rng.standard_normal((k, d, k))
    scores = np.einsum("nd,ndk->nk", x, w[y])
    scores[np.arange(n), y] = -np.inf
    soft = np.exp(scores - scores.max(axis=1, keepdims=True))
    soft /= soft.sum(axis=1, keepdims=True)
    top = scores.argmax(axis=1)

    flipped = noisy != y
    share = np.mean(noisy[flipped] == top[flipped])
    expected = soft[np.arange(n), top][flipped].mean()
    assert share > 0.5
    assert abs(share - expected) < 4 * sigma(expected, int(flipped.sum())), (share, expected)


# --- protocol.noisy_labels ---------------------------------------------------------

SUITE = get_suite("noisy-labels")


def label_hash(labels: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes()).hexdigest()


@pytest.mark.parametrize("name", ["sym-0.4", "asym-0.4", "idn-0.4"])
def test_noisy_labels_deterministic_and_seed_dependent(name):
    data = load_dataset("digits", None, False)
    variant = SUITE.variant(name)
    a = noisy_labels(data, variant, 3)
    b = noisy_labels(data, variant, 3)
    c = noisy_labels(data, variant, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == data.y_train.shape


def test_noisy_labels_rates_and_clean():
    data = load_dataset("digits", None, False)
    assert noise.realized_rate(data.y_train, noisy_labels(data, SUITE.variant("sym-0.4"), 0)) \
        == 0.4
    clean = noisy_labels(data, SUITE.variant("clean"), 0)
    np.testing.assert_array_equal(clean, data.y_train)
    assert clean is not data.y_train
    assert not np.array_equal(noisy_labels(data, SUITE.variant("sym-0.2"), 0),
                              noisy_labels(data, SUITE.variant("sym-0.4"), 0))


def test_noisy_labels_same_in_fresh_process():
    data = load_dataset("digits", None, False)
    here = label_hash(noisy_labels(data, SUITE.variant("sym-0.4"), 3))
    code = (
        "import hashlib, numpy as np\n"
        "from harness.contract.registry import get_suite\n"
        "from suites.noisy_labels.pipeline import load_dataset, noisy_labels\n"
        "d = load_dataset('digits', None, False)\n"
        "v = get_suite('noisy-labels').variant('sym-0.4')\n"
        "y = np.ascontiguousarray(noisy_labels(d, v, 3), dtype=np.int64)\n"
        "print(hashlib.sha256(y.tobytes()).hexdigest())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == here
