"""Known-answer and batching tests for the dual focal loss (built-in ``dual_focal``).
Expected values are computed with numpy from the formula in its docstring, never by calling
the loss under test: ``-(1 - p_y + p_j)^gamma log p_y``, ``p_j`` the largest probability
strictly below ``p_y`` (0 when there is none), as in the official code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.objectives.builtin.dual_focal import classification_loss
from harness.objectives.loading import load_objective
from harness.objectives.validate import validate

# Three samples, three classes: the target is the argmax (row 0), ranked second (row 1:
# p_j is the class below it, not the argmax) and ranked last (row 2: p_j = 0).
Z = np.array([[2.0, 0.5, -1.0], [0.5, 2.0, -1.0], [-2.0, 2.0, 0.0]])
Y = np.array([0, 0, 0])


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def by_hand(z, y, gamma=5.0):
    p = softmax(z)
    rows = np.arange(len(y))
    p_y = p[rows, y]
    p_j = np.array([max([q for q in p[i] if q < p_y[i]], default=0.0) for i in rows])
    return -((1 - p_y + p_j) ** gamma) * np.log(p_y)


def run(z=Z, y=Y, **kw):
    return classification_loss(torch.tensor(z, dtype=torch.float64), torch.tensor(y), **kw)


def check(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-10, atol=1e-12)


def test_known_answer_on_three_by_three():
    p = softmax(Z)
    p_j = np.array([p[0, 1], p[1, 2], 0.0])  # written out: the class ranked after the target
    expected = -((1 - p[:, 0] + p_j) ** 5) * np.log(p[:, 0])
    np.testing.assert_allclose(by_hand(Z, Y), expected, rtol=1e-14)
    check(run(), expected)
    assert run().shape == (3,)


def test_gamma_is_five_by_default_and_zero_is_cross_entropy():
    check(run(gamma=5.0), by_hand(Z, Y, 5.0))
    check(run(gamma=2.3), by_hand(Z, Y, 2.3))
    check(run(gamma=0.0), -np.log(softmax(Z)[:, 0]))
    assert load_objective("dual_focal").defaults == {"gamma": 5.0}


def test_target_not_argmax_uses_the_class_ranked_after_it():
    """Row 1's target is second: its p_j is p_2 (below it), not the argmax p_1."""
    p = softmax(Z)
    other = -((1 - p[1, 0] + p[1, 1]) ** 5) * np.log(p[1, 0])  # the argmax instead
    assert abs(run()[1].item() - other) > 1e-3
    check(run()[1], by_hand(Z, Y)[1])


def test_gradient_matches_central_differences_of_the_numpy_formula():
    """d/dz of the full loss, the factor (1 - p_y + p_j)^gamma included."""
    logits = torch.tensor(Z, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(classification_loss(logits, torch.tensor(Y)).sum(), logits)
    h, numeric = 1e-6, np.zeros_like(Z)
    for i in range(3):
        for k in range(3):
            up, down = Z.copy(), Z.copy()
            up[i, k] += h
            down[i, k] -= h
            numeric[i, k] = (by_hand(up, Y)[i] - by_hand(down, Y)[i]) / (2 * h)
    np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-6, atol=1e-9)


def test_vmap_over_three_members_matches_a_loop_with_finite_gradients():
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 16, 10, generator=g, dtype=torch.float64)).requires_grad_()
    targets = torch.randint(0, 10, (3, 16), generator=g)
    out = torch.func.vmap(classification_loss)(logits, targets)
    loop = torch.stack([classification_loss(logits[s], targets[s]) for s in range(3)])
    torch.testing.assert_close(out, loop)
    assert out.shape == (3, 16)
    for s in range(3):  # and each member against numpy
        check(out[s].detach(), by_hand(logits[s].detach().numpy(), targets[s].numpy()))
    (grad,) = torch.autograd.grad(out.sum(), logits)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


@pytest.mark.parametrize("logits", [[[30.0, -30.0, 0.0]], [[0.0, 0.0, 0.0]],
                                    [[-50.0, 50.0, 1.0]]])
def test_finite_on_extreme_and_tied_logits(logits):
    x = torch.tensor(logits, requires_grad=True)
    out = classification_loss(x, torch.tensor([0]))
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()


def test_tied_logits_have_no_class_below_the_target():
    """All four probabilities equal p_y = 1/4, none strictly below: p_j = 0."""
    check(run(z=np.zeros((1, 4)), y=np.array([2])), [0.75**5 * np.log(4.0)])


def test_validator_finds_no_problems_and_the_graph_traces():
    from harness.traced import Graph, export
    from harness.train import reduce_loss

    report = validate("dual_focal")
    assert not [p for p in report.problems if p.severity == "error"], report.format()
    assert report.problems == [], report.format()
    hook = load_objective("dual_focal").bind("classification_loss")
    header, blobs = export(lambda x, y: reduce_loss(hook(x, y)),
                           [["<f4", [64, 10]], ["<i8", [64]]])
    graph = Graph(header, b"".join(blobs))
    g = torch.Generator().manual_seed(2)
    x, y = 3 * torch.randn(40, 10, generator=g), torch.randint(10, (40,), generator=g)
    torch.testing.assert_close(graph(x, y), reduce_loss(hook(x, y)))
