"""Known-answer and batching tests for the calibration-oriented training losses
(focal3, flsd53, dual_focal, brier, spherical, mmce). Expected values are computed with numpy from
the formulas in each file's docstring, never by calling the loss under test."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch

from harness.objectives.loading import load_objective
from harness.objectives.validate import validate

# Three samples, three classes: p_y ~ 0.79, ~ 0.37 and ~ 0.016 (not the argmax).
Z = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-2.0, 2.0, 0.0]])
Y = np.array([0, 2, 0])
PER_SAMPLE = ["focal3", "flsd53", "dual_focal", "brier", "spherical"]
ALL = [*PER_SAMPLE, "mmce"]


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


P = softmax(Z)
P_Y = P[np.arange(3), Y]


def run(name, z=Z, y=Y, **kw):
    fn = importlib.import_module(f"harness.objectives.builtin.{name}").classification_loss
    return fn(torch.tensor(z, dtype=torch.float64), torch.tensor(y), **kw)


def check(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-10, atol=1e-12)


def autograd_and_numeric(name, per_sample, z=Z, y=Y, h=1e-6):
    """d/dz of the loss's sum by autograd, and by central differences of ``per_sample``
    (the numpy formula, [N] per-sample losses of logits z)."""
    logits = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    fn = importlib.import_module(f"harness.objectives.builtin.{name}").classification_loss
    (grad,) = torch.autograd.grad(fn(logits, torch.tensor(y)).sum(), logits)
    numeric = np.zeros_like(z)
    for i, k in np.ndindex(z.shape):  # samples are independent: only row i moves
        up, down = z.copy(), z.copy()
        up[i, k] += h
        down[i, k] -= h
        numeric[i, k] = (per_sample(up)[i] - per_sample(down)[i]) / (2 * h)
    return grad.numpy(), numeric


def test_focal3():
    check(run("focal3"), -((1 - P_Y) ** 3) * np.log(P_Y))
    check(run("focal3", gamma=0.0), -np.log(P_Y))


def test_focal3_gradient_flows_through_the_modulating_factor():
    """Unlike the label-noise ``focal``: d/dz of the full ``-(1-p)^g log p``, by central
    differences of the numpy formula."""
    def per_sample(z):
        p_y = softmax(z)[np.arange(len(Y)), Y]
        return -((1 - p_y) ** 3) * np.log(p_y)

    grad, numeric = autograd_and_numeric("focal3", per_sample)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_flsd53_uses_gamma_5_below_0_2_and_3_elsewhere():
    gamma = np.where(P_Y < 0.2, 5.0, 3.0)
    assert gamma.tolist() == [3.0, 3.0, 5.0]  # sample 2's p_y ~ 0.016
    check(run("flsd53"), -((1 - P_Y) ** gamma) * np.log(P_Y))


# Dual focal: -(1 - p_y + p_j)^gamma log p_y, p_j the largest probability strictly below
# p_y (0 when there is none), as in the official code. Its own three rows: the target is
# the argmax (row 0), ranked second (row 1: p_j is the class below it, not the argmax) and
# ranked last (row 2: p_j = 0).
Z_DF = np.array([[2.0, 0.5, -1.0], [0.5, 2.0, -1.0], [-2.0, 2.0, 0.0]])
Y_DF = np.array([0, 0, 0])


def dual_focal_by_hand(z, y, gamma=5.0):
    p = softmax(z)
    rows = np.arange(len(y))
    p_y = p[rows, y]
    p_j = np.array([max([q for q in p[i] if q < p_y[i]], default=0.0) for i in rows])
    return -((1 - p_y + p_j) ** gamma) * np.log(p_y)


def test_dual_focal_known_answer():
    p = softmax(Z_DF)
    p_j = np.array([p[0, 1], p[1, 2], 0.0])  # written out: the class ranked after the target
    expected = -((1 - p[:, 0] + p_j) ** 5) * np.log(p[:, 0])
    np.testing.assert_allclose(dual_focal_by_hand(Z_DF, Y_DF), expected, rtol=1e-14)
    check(run("dual_focal", Z_DF, Y_DF), expected)
    assert run("dual_focal", Z_DF, Y_DF).shape == (3,)


def test_dual_focal_gamma_is_five_by_default_and_zero_is_cross_entropy():
    for gamma in (5.0, 2.3):
        check(run("dual_focal", Z_DF, Y_DF, gamma=gamma), dual_focal_by_hand(Z_DF, Y_DF, gamma))
    check(run("dual_focal", Z_DF, Y_DF, gamma=0.0), -np.log(softmax(Z_DF)[:, 0]))
    assert load_objective("dual_focal").defaults == {"gamma": 5.0}


def test_dual_focal_target_not_argmax_uses_the_class_ranked_after_it():
    """Row 1's target is second: its p_j is p_2 (below it), not the argmax p_1."""
    p = softmax(Z_DF)
    other = -((1 - p[1, 0] + p[1, 1]) ** 5) * np.log(p[1, 0])  # the argmax instead
    out = run("dual_focal", Z_DF, Y_DF)
    assert abs(out[1].item() - other) > 1e-3
    check(out[1], dual_focal_by_hand(Z_DF, Y_DF)[1])


def test_dual_focal_gradient_matches_central_differences():
    """d/dz of the full loss, the factor (1 - p_y + p_j)^gamma included."""
    grad, numeric = autograd_and_numeric("dual_focal", lambda z: dual_focal_by_hand(z, Y_DF),
                                         Z_DF, Y_DF)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_dual_focal_batched_members_match_numpy():
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(3, 16, 10, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 10, (3, 16), generator=g)
    fn = importlib.import_module("harness.objectives.builtin.dual_focal").classification_loss
    out = torch.func.vmap(fn)(logits, targets)
    for s in range(3):
        check(out[s], dual_focal_by_hand(logits[s].numpy(), targets[s].numpy()))


def test_dual_focal_tied_logits_have_no_class_below_the_target():
    """All four probabilities equal p_y = 1/4, none strictly below: p_j = 0."""
    check(run("dual_focal", np.zeros((1, 4)), np.array([2])), [0.75**5 * np.log(4.0)])


def test_dual_focal_validates_without_even_a_warning():
    assert validate("dual_focal").problems == [], validate("dual_focal").format()


def test_brier():
    onehot = np.eye(3)[Y]
    check(run("brier"), ((P - onehot) ** 2).sum(-1))


def test_spherical():
    check(run("spherical"), 1 - P_Y / np.sqrt((P**2).sum(-1)))
    # bounds: 0 for a confident correct prediction, 1 - 1/sqrt(K) for a uniform one
    out = run("spherical", z=np.array([[60.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), y=np.array([0, 1]))
    check(out, [0.0, 1 - 1 / math.sqrt(3)])


def _mmce_by_hand(z, y, lam=2.0, width=0.4):
    p = softmax(z)
    r, pred = p.max(-1), p.argmax(-1)
    right = [i for i in range(len(y)) if pred[i] == y[i]]
    wrong = [i for i in range(len(y)) if pred[i] != y[i]]
    ce = -np.mean(np.log(p[np.arange(len(y)), y]))
    if not right or not wrong:
        return ce
    m, n = len(right), len(wrong)

    def k(a, b):
        return math.exp(-abs(a - b) / width)

    s_cc = np.mean([(1 - r[i]) * (1 - r[j]) * k(r[i], r[j]) for i in right for j in right])
    s_ii = np.mean([r[i] * r[j] * k(r[i], r[j]) for i in wrong for j in wrong])
    s_ci = np.mean([(1 - r[i]) * r[j] * k(r[i], r[j]) for i in right for j in wrong])
    sq = s_cc / (m * m + 1e-5) + s_ii / (n * n + 1e-5) - 2 * s_ci / (m * n + 1e-5)
    return ce + lam * math.sqrt(max(sq, 0.0) + 1e-10)


def test_mmce_by_hand():
    # samples 0 right, 1 right (argmax 2 = label), 2 wrong
    check(run("mmce"), _mmce_by_hand(Z, Y))
    gen = np.random.default_rng(0)
    z, y = gen.normal(0, 2, (32, 5)), gen.integers(0, 5, 32)
    check(run("mmce", z=z, y=y, lam=0.7), _mmce_by_hand(z, y, lam=0.7))


def test_mmce_is_plain_ce_when_every_prediction_is_right_or_every_one_wrong():
    y_right = Z.argmax(-1)
    check(run("mmce", y=y_right), -np.mean(np.log(P[np.arange(3), y_right])))
    y_wrong = (Z.argmax(-1) + 1) % 3
    check(run("mmce", y=y_wrong), -np.mean(np.log(P[np.arange(3), y_wrong])))


@pytest.mark.parametrize("name", ALL)
def test_vmap_over_seeds_matches_a_loop_with_finite_gradients(name):
    fn = importlib.import_module(f"harness.objectives.builtin.{name}").classification_loss
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 16, 10, generator=g, dtype=torch.float64)).requires_grad_()
    targets = torch.randint(0, 10, (3, 16), generator=g)
    out = torch.func.vmap(fn)(logits, targets)
    loop = torch.stack([fn(logits[s], targets[s]) for s in range(3)])
    torch.testing.assert_close(out, loop)
    assert out.shape == ((3, 16) if name in PER_SAMPLE else (3,))
    (grad,) = torch.autograd.grad(out.sum(), logits)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


@pytest.mark.parametrize("name", ALL)
def test_finite_on_extreme_logits(name):
    logits = torch.tensor([[30.0, -30.0, 0.0], [0.0, 0.0, 0.0], [-50.0, 50.0, 1.0]],
                          requires_grad=True)
    fn = importlib.import_module(f"harness.objectives.builtin.{name}").classification_loss
    out = fn(logits, torch.tensor([0, 1, 0]))
    (grad,) = torch.autograd.grad(out.sum(), logits)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()


@pytest.mark.parametrize("name", ALL)
def test_passes_the_engines_validator_and_traces(name):
    """What a submitted copy would go through: the validator's smoke checks, and a graph
    the worker can run (harness.sandbox.traced) equal to the hook."""
    from harness.sandbox.traced import Graph, export
    from harness.train import reduce_loss

    report = validate(name)
    assert report.ok, report.format()
    hook = load_objective(name).bind("classification_loss")
    header, blobs = export(lambda x, y: reduce_loss(hook(x, y)),
                           [["<f4", [64, 10]], ["<i8", [64]]])
    graph = Graph(header, b"".join(blobs))
    g = torch.Generator().manual_seed(2)
    x, y = 3 * torch.randn(40, 10, generator=g), torch.randint(10, (40,), generator=g)
    torch.testing.assert_close(graph(x, y), reduce_loss(hook(x, y)))
