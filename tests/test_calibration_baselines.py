"""Known-answer and batching tests for the calibration-oriented training losses
(focal3, flsd53, brier, spherical, mmce). Expected values are computed with numpy from
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
PER_SAMPLE = ["focal3", "flsd53", "brier", "spherical"]
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


def test_focal3():
    check(run("focal3"), -((1 - P_Y) ** 3) * np.log(P_Y))
    check(run("focal3", gamma=0.0), -np.log(P_Y))


def test_focal3_gradient_flows_through_the_modulating_factor():
    """Unlike the label-noise ``focal``: d/dz of the full ``-(1-p)^g log p``, by central
    differences of the numpy formula."""
    logits = torch.tensor(Z, dtype=torch.float64, requires_grad=True)
    fn = importlib.import_module("harness.objectives.builtin.focal3").classification_loss
    (grad,) = torch.autograd.grad(fn(logits, torch.tensor(Y)).sum(), logits)
    h, numeric = 1e-6, np.zeros_like(Z)
    for i in range(3):
        for k in range(3):
            up, down = Z.copy(), Z.copy()
            up[i, k] += h
            down[i, k] -= h
            f = [(-((1 - softmax(z)[i, Y[i]]) ** 3) * np.log(softmax(z)[i, Y[i]]))
                 for z in (up, down)]
            numeric[i, k] = (f[0] - f[1]) / (2 * h)
    np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-6, atol=1e-9)


def test_flsd53_uses_gamma_5_below_0_2_and_3_elsewhere():
    gamma = np.where(P_Y < 0.2, 5.0, 3.0)
    assert gamma.tolist() == [3.0, 3.0, 5.0]  # sample 2's p_y ~ 0.016
    check(run("flsd53"), -((1 - P_Y) ** gamma) * np.log(P_Y))


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
    the worker can run (harness.traced) equal to the hook."""
    from harness.traced import Graph, export
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
