"""Label-noise generators (README.md in this folder), numpy only, each from an explicit Generator.

The noise draw depends on (variant, seed) only, never on the objective, so every
objective sees the same noisy labels for seed k (paired seeds).
"""

from __future__ import annotations

import numpy as np

# MNIST-style class-dependent flips (APL `MNISTNoisy`): 7→1, 2→7, 5↔6, 3→8.
MNIST_ASYMMETRIC = {7: 1, 2: 7, 5: 6, 6: 5, 3: 8}


def symmetric_exact(y: np.ndarray, rate: float, num_classes: int,
                    rng: np.random.Generator) -> np.ndarray:
    """APL "sym": exactly int(int(rate·N)/K) samples per class move to a uniformly drawn
    *other* class, so the realised flip rate is ``rate`` up to rounding."""
    noisy = y.copy()
    per_class = int(int(rate * len(y)) / num_classes)
    for k in range(num_classes):
        members = np.flatnonzero(y == k)
        chosen = rng.choice(members, size=min(per_class, len(members)), replace=False)
        others = np.array([c for c in range(num_classes) if c != k])
        noisy[chosen] = rng.choice(others, size=len(chosen))
    return noisy


def asymmetric(y: np.ndarray, rate: float, mapping: dict[int, int],
               rng: np.random.Generator) -> np.ndarray:
    """Class-dependent flips: a sample of a source class moves to its target with
    probability ``rate`` (transition-matrix sampling, as APL does for MNIST). Flips are
    drawn from the original labels, so 5↔6 never chains."""
    noisy = y.copy()
    flip = rng.random(len(y)) < rate
    for source, target in mapping.items():
        noisy[(y == source) & flip] = target
    return noisy


def instance_dependent(x: np.ndarray, y: np.ndarray, rate: float, num_classes: int,
                       rng: np.random.Generator, norm_std: float = 0.1) -> np.ndarray:
    """Xia et al. (NeurIPS 2020) IDN generator: per-sample flip rate q_i ~ TruncNormal(rate,
    0.1, [0, 1]); the wrong-class distribution is softmax(x_i · W[y_i]) with W ~ N(0, 1).

    ``x`` is [N, D] flattened features; their scale shapes the noise (the original uses
    0–255 pixels, which makes each sample flip to nearly one class), so callers fix it.
    """
    from scipy import stats  # here: its import takes a second, for the IDN variants alone

    n, d = x.shape
    a, b = (0 - rate) / norm_std, (1 - rate) / norm_std
    q = stats.truncnorm.rvs(a, b, loc=rate, scale=norm_std, size=n, random_state=rng)
    w = rng.standard_normal((num_classes, d, num_classes))
    scores = np.einsum("nd,ndk->nk", x, w[y])
    scores[np.arange(n), y] = -np.inf
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    p *= (q / p.sum(axis=1))[:, None]
    p[np.arange(n), y] = 1 - q
    u = rng.random(n)[:, None]
    return np.minimum((p.cumsum(axis=1) < u).sum(axis=1), num_classes - 1).astype(y.dtype)


def realized_rate(clean: np.ndarray, noisy: np.ndarray) -> float:
    return float(np.mean(clean != noisy))
