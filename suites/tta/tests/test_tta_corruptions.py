"""digits-C: every corruption is deterministic per image seed, stays in [0, 1], and grows
with severity; the building blocks match hand-computed values or an independent formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage

from harness.data.digits import digits_split
from suites.tta import CORRUPTIONS, HELD_OUT
from suites.tta import corruptions as c

NAMES = list(c.ALL)
RANDOM = {"gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "glass_blur",
          "motion_blur", "snow", "frost", "fog", "spatter", "elastic_transform"}


@pytest.fixture(scope="module")
def digits():
    _, _, x, _ = digits_split()
    return x.reshape(-1, 8, 8)[:200].astype(np.float64)


def test_the_registry_matches_the_suite_declaration():
    assert tuple(c.BENCHMARK) == CORRUPTIONS
    assert tuple(c.HELD_OUT) == HELD_OUT
    assert not set(CORRUPTIONS) & set(HELD_OUT) and len(c.ALL) == 19


# --- the three properties, per corruption -------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_corruption_is_deterministic_per_image_seed(name, digits):
    batch = digits[:20]
    a = c.corrupt(batch, name, 5, 1234)
    assert np.array_equal(a, c.corrupt(batch, name, 5, 1234))
    # Image i depends on its own seed only: the same image alone, seeded 1234 + i.
    assert np.array_equal(a[7], c.corrupt(batch[7:8], name, 5, 1234 + 7)[0])
    if name in RANDOM:
        assert not np.array_equal(a, c.corrupt(batch, name, 5, 999))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("severity", [1, 3, 5])
def test_a_corruption_stays_an_image_in_the_unit_range(name, severity, digits):
    out = c.corrupt(digits[:50], name, severity, 7)
    assert out.dtype == np.float32 and out.shape == (50, 8, 8)
    assert np.isfinite(out).all() and out.min() >= 0 and out.max() <= 1
    extremes = np.stack([np.zeros((8, 8)), np.ones((8, 8)), np.eye(8)])
    out = c.corrupt(extremes, name, severity, 7)
    assert np.isfinite(out).all() and out.min() >= 0 and out.max() <= 1


@pytest.mark.parametrize("name", NAMES)
def test_severity_increases_the_distance_to_the_clean_digit(name, digits):
    distance = [float(np.linalg.norm(c.corrupt(digits, name, s, 100) - digits, axis=(1, 2))
                      .mean()) for s in range(1, 6)]
    assert distance[0] > 0.05, distance  # severity 1 already changes the digits
    assert all(b > a for a, b in zip(distance, distance[1:], strict=False)), distance


# --- building blocks: known answers --------------------------------------------------------


def test_noise_family_formulas():
    x = np.full((1, 8, 8), 0.5)
    rng = np.random.RandomState(3)
    expected = np.clip(0.5 + rng.normal(size=(8, 8), scale=3 * 0.10), 0, 1)
    np.testing.assert_allclose(c.corrupt(x, "gaussian_noise", 5, 3)[0], expected, atol=1e-7)
    rng = np.random.RandomState(3)
    lam = 50 / 9
    np.testing.assert_allclose(c.corrupt(x, "shot_noise", 5, 3)[0],
                               np.clip(rng.poisson(0.5 * lam, size=(8, 8)) / lam, 0, 1),
                               atol=1e-7)
    rng = np.random.RandomState(3)
    speckle = np.clip(0.5 + 0.5 * rng.normal(size=(8, 8), scale=3 * 0.2), 0, 1)
    np.testing.assert_allclose(c.corrupt(x, "speckle_noise", 5, 3)[0], speckle, atol=1e-7)


def test_impulse_noise_sets_a_share_of_pixels_to_black_or_white():
    x = np.full((400, 8, 8), 0.5)
    out = c.corrupt(x, "impulse_noise", 5, 0)
    changed = out != 0.5
    assert set(np.unique(out[changed])) == {0.0, 1.0}
    assert changed.mean() == pytest.approx(3 * 0.07, abs=0.01)
    assert (out[changed] == 1).mean() == pytest.approx(0.5, abs=0.03)


def test_digital_family_by_hand():
    x = np.array([[[0.0, 1.0], [0.5, 0.5]]])
    # contrast: (x − mean)·c + mean, mean 0.5, c = 0.15 at severity 5
    np.testing.assert_allclose(c.corrupt(x, "contrast", 5, 0)[0],
                               [[0.425, 0.575], [0.5, 0.5]], atol=1e-7)
    # brightness: + 0.3, clipped
    np.testing.assert_allclose(c.corrupt(x, "brightness", 5, 0)[0], [[0.3, 1.0], [0.8, 0.8]],
                               atol=1e-7)
    # saturate: (x − ½)·gain + ½, gain 1.5 at severity 1
    np.testing.assert_allclose(c.corrupt(x, "saturate", 1, 0)[0], [[0.0, 1.0], [0.5, 0.5]],
                               atol=1e-7)
    y = np.array([[[0.25, 0.75], [0.5, 0.5]]])
    np.testing.assert_allclose(c.corrupt(y, "saturate", 1, 0)[0], [[0.125, 0.875], [0.5, 0.5]],
                               atol=1e-7)


def test_pixelate_averages_blocks():
    x = np.zeros((1, 8, 8))
    x[0, :2, :2] = 1.0  # one 2×2 block of the 4×4 grid (severity 3)
    out = c.corrupt(x, "pixelate", 3, 0)[0]
    np.testing.assert_allclose(out, x[0], atol=1e-6)  # aligned blocks survive unchanged
    x[0, 0, 0] = 0.0
    out = c.corrupt(x, "pixelate", 3, 0)[0]
    np.testing.assert_allclose(out[:2, :2], 0.75, atol=1e-6)
    np.testing.assert_allclose(out[2:, :], 0, atol=1e-6)
    # severity 5: 2×2 pixels of 4×4 blocks
    out = c.corrupt(np.eye(8)[None], "pixelate", 5, 0)[0]
    np.testing.assert_allclose(out, np.kron([[0.25, 0.0], [0.0, 0.25]], np.ones((4, 4))),
                               atol=1e-6)


def test_jpeg_round_trip_is_close_at_high_quality_and_worse_at_low():
    _, _, x, _ = digits_split()
    d = x.reshape(-1, 8, 8)[:50]
    err = [np.abs(c.corrupt(d, "jpeg_compression", s, 0) - d).mean() for s in (1, 5)]
    assert 0 < err[0] < err[1] < 0.1


def test_motion_kernel_weights_and_offsets():
    weights, offsets = c.motion_kernel(1, 1.0, 0)
    w = np.exp(-np.arange(3) ** 2 / 2.0)
    np.testing.assert_allclose(weights, w / w.sum())
    assert offsets.tolist() == [[0, 0], [0, 1], [0, 2]]  # (dy, dx) along +x at 0°
    _, offsets = c.motion_kernel(2, 1.0, 90)
    assert offsets.tolist() == [[0, 0], [1, 0], [2, 0], [3, 0], [4, 0]]
    _, offsets = c.motion_kernel(1, 1.0, 45)
    # round(i·cos 45°), as ImageMagick's ceil(v − ½): 0, 1 (0.71), 1 (1.41)
    assert offsets.tolist() == [[0, 0], [1, 1], [1, 1]]


def test_motion_blur_smears_a_point_backwards_along_the_angle():
    x = np.zeros((8, 8))
    x[3, 5] = 1.0
    out = c.motion_blur_image(x, 1, 1.0, 0)
    weights, _ = c.motion_kernel(1, 1.0, 0)
    # out[y, x] = Σ w_i · img[y, x + i]: the point lands at x = 5, 4, 3
    np.testing.assert_allclose(out[3, [5, 4, 3]], weights)
    assert out.sum() == pytest.approx(1.0)


def test_disk_kernel_is_a_normalised_disk():
    k = c.disk_kernel(1, 0.01)  # alias blur negligible: the 5-pixel cross
    assert k.shape == (3, 3) and k.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(k, [[0, 0.2, 0], [0.2, 0.2, 0.2], [0, 0.2, 0]], atol=1e-12)
    k = c.disk_kernel(1.5, 0.01)
    np.testing.assert_allclose(k, np.full((3, 3), 1 / 9), atol=1e-12)
    # the alias blur is OpenCV's 3-tap Gaussian, separable
    taps = np.exp(-np.array([1, 0, 1]) / (2 * 0.5 ** 2))
    taps /= taps.sum()
    point = c.disk_kernel(0.3, 0.5)
    np.testing.assert_allclose(point, np.outer(taps, taps), atol=1e-12)


def test_defocus_blur_is_a_mirrored_convolution_with_the_disk():
    rng = np.random.default_rng(0)
    x = rng.random((8, 8))
    expected = ndimage.convolve(x, c.disk_kernel(1.5, 0.1), mode="mirror")
    np.testing.assert_allclose(c.corrupt(x[None], "defocus_blur", 5, 0)[0], expected,
                               atol=1e-6)


def test_clipped_zoom_of_one_is_the_identity_and_zooms_the_centre():
    x = np.arange(64, dtype=np.float64).reshape(8, 8)
    np.testing.assert_allclose(c.clipped_zoom(x, 1.0), x)
    z = c.clipped_zoom(x, 2.0)
    assert z.shape == (8, 8)
    # the centre 4×4 (rows 2..5) stretched over the whole image
    assert z[0, 0] == x[2, 2] and z[-1, -1] == x[5, 5]


def test_plasma_is_a_normalised_periodic_fractal():
    p = c.plasma(16, 2.0, np.random.RandomState(0))
    assert p.shape == (16, 16) and p.min() == 0 and p.max() == 1
    assert np.array_equal(p, c.plasma(16, 2.0, np.random.RandomState(0)))
    # a larger decay damps the fine scales: neighbouring pixels differ less
    rough = np.mean([np.abs(np.diff(c.plasma(32, 1.2, np.random.RandomState(s)))).mean()
                     for s in range(10)])
    smooth = np.mean([np.abs(np.diff(c.plasma(32, 4.0, np.random.RandomState(s)))).mean()
                      for s in range(10)])
    assert smooth < rough
    with pytest.raises(ValueError, match="power of two"):
        c.plasma(12, 2.0, np.random.RandomState(0))


def test_elastic_severity_one_is_an_affine_map_only():
    # α = 0: the displacement field is zero, so a constant image stays constant
    x = np.full((1, 8, 8), 0.4)
    np.testing.assert_allclose(c.corrupt(x, "elastic_transform", 1, 0), x, atol=1e-6)


def test_glass_blur_at_severity_one_moves_few_pixels():
    _, _, x, _ = digits_split()
    d = x.reshape(-1, 8, 8)[:100]
    changed = [(np.abs(c.corrupt(d, "glass_blur", s, 0) - d) > 0.1).mean() for s in (1, 5)]
    assert changed[0] < changed[1]
    assert math.isclose(changed[0], 0.05, abs_tol=0.05)


# --- bad input: a clear error ---------------------------------------------------------------


@pytest.mark.parametrize("args, match", [
    (("fog_of_war", 1), "unknown corruption 'fog_of_war'"),
    (("fog", 0), "severity must be 1, 2, 3, 4 or 5"),
    (("fog", 6), "severity must be 1, 2, 3, 4 or 5"),
    (("fog", True), "severity must be 1, 2, 3, 4 or 5"),
])
def test_bad_names_and_severities_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        c.corrupt(np.zeros((1, 8, 8)), *args, 0)


@pytest.mark.parametrize("images, match", [
    (np.zeros((8, 8)), r"\[N, H, W\]"),
    (np.zeros((1, 8, 6)), r"\[N, H, W\]"),
    (np.full((1, 8, 8), 16.0), r"in \[0, 1\]"),
    (np.full((1, 8, 8), np.nan), r"in \[0, 1\]"),
])
def test_bad_images_are_refused(images, match):
    with pytest.raises(ValueError, match=match):
        c.corrupt(images, "fog", 1, 0)
