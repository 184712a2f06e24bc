"""The test-time adaptation streams (suites.tta.streams): what each scenario feeds the
model, in which batches, with which resets."""

from __future__ import annotations

import numpy as np
import pytest

from suites.tta import streams

LABELS = np.repeat(np.arange(10), 30)  # a pool of 300 samples, 30 per class
K, H = 15, 4  # benchmark and held-out corruptions


def build(scenario: str, seed: int = 0, batch: int = 64) -> streams.Stream:
    return streams.build(scenario, LABELS, corruptions=K, heldout=H, seed=seed,
                         batch_size=batch)


def runs(labels: np.ndarray) -> float:
    """Mean length of runs of one label."""
    return len(labels) / (1 + np.count_nonzero(np.diff(labels)))


@pytest.mark.parametrize("scenario", streams.SCENARIOS)
def test_every_seed_shares_batches_and_resets_but_not_the_order(scenario):
    a, b = build(scenario, 0), build(scenario, 1)
    assert a.batches == b.batches and a.resets == b.resets
    assert not np.array_equal(a.image, b.image)
    again = build(scenario, 0)
    assert np.array_equal(a.image, again.image) and np.array_equal(a.segment, again.segment)
    # Batches tile the stream in order and never span two segments.
    assert a.batches[0][0] == 0 and a.batches[-1][1] == len(a.image)
    assert all(x[1] == y[0] for x, y in zip(a.batches, a.batches[1:], strict=False))
    if scenario != "mixed":
        assert all(len(set(a.segment[lo:hi])) == 1 for lo, hi in a.batches)
    assert a.resets[0] is True


@pytest.mark.parametrize("scenario", ["iid", "small-batch", "correlated", "continual",
                                      "gradual"])
def test_each_segment_is_the_whole_pool_once(scenario):
    s = build(scenario)
    for i in range(len(s.segments)):
        assert sorted(s.image[s.segment == i]) == list(range(len(LABELS)))


def test_iid_resets_per_corruption_at_severity_5_and_holds_the_extra_four_apart():
    s = build("iid")
    assert [g.corruption for g in s.segments] == list(range(K + H))
    assert [g.heldout for g in s.segments] == [False] * K + [True] * H
    assert {g.severity for g in s.segments} == {5}
    starts = [b for b, (lo, _) in enumerate(s.batches)
              if lo == 0 or s.segment[lo] != s.segment[lo - 1]]
    assert [b for b, r in enumerate(s.resets) if r] == starts
    assert max(hi - lo for lo, hi in s.batches) == 64
    assert max(hi - lo for lo, hi in build("small-batch", batch=4).batches) == 4
    assert not any(g.heldout for g in build("small-batch", batch=4).segments)


@pytest.mark.parametrize("scenario", ["continual", "mixed", "gradual"])
def test_long_streams_reset_only_at_the_start(scenario):
    assert [b for b, r in enumerate(build(scenario).resets) if r] == [0]


def test_gradual_ramps_severity_up_and_down_per_corruption():
    s = build("gradual")
    assert [g.severity for g in s.segments] == list(streams.GRADUAL) * K
    assert [g.corruption for g in s.segments] == [c for c in range(K)
                                                  for _ in streams.GRADUAL]


def test_mixed_holds_every_corruption_of_every_image_once_interleaved():
    s = build("mixed")
    pairs = set(zip(s.segment.tolist(), s.image.tolist(), strict=True))
    assert len(pairs) == len(s.image) == K * len(LABELS)
    first = s.segment[:64]
    assert len(set(first.tolist())) > 5  # one batch mixes many corruptions


def test_correlated_sorts_classes_into_long_runs():
    s = build("correlated")
    iid = build("iid")
    for i in range(K):
        order = LABELS[s.image[s.segment == i]]
        assert sorted(order) == sorted(LABELS)  # a permutation of the pool
        assert runs(order) > 5 * runs(LABELS[iid.image[iid.segment == i]])


def test_dirichlet_sorting_follows_the_ttab_algorithm():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 80)
    order = streams.dirichlet_sorted(labels, 0.1, rng)
    assert sorted(order) == list(range(len(labels)))
    # K chunks, each listing its classes one after the other: at most K·K runs.
    assert 1 + np.count_nonzero(np.diff(labels[order])) <= 100
    # A large δ spreads every class over every chunk (about uniform proportions).
    wide = streams.dirichlet_sorted(labels, 1000.0, np.random.default_rng(0))
    assert 1 + np.count_nonzero(np.diff(labels[wide])) > 60


def test_label_shift_keeps_the_size_and_shifts_the_class_priors():
    s = build("label-shift")
    shares = []
    for i in range(K):
        order = LABELS[s.image[s.segment == i]]
        assert len(order) == len(LABELS)
        shares.append(np.bincount(order, minlength=10).max() / len(order))
    # Uniform priors give a largest class share near 0.1; Dir(1) priors far above.
    assert np.mean(shares) > 0.2


def test_unknown_scenario():
    with pytest.raises(ValueError, match="unknown scenario 'nope'.*iid"):
        build("nope")
