"""The seed-batched trainer: batched equals the per-seed loop, seeds are isolated."""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest
import torch

from harness import train
from harness.models.mlp import mlp
from harness.objectives.loading import load_objective, objective_from_module
from harness.train import Protocol, epoch_orders, stacked_init, train_members

N, D, C = 96, 12, 4
SHORT = Protocol(epochs=3, batch_size=32, lr=0.1)


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=gen)
    y = (x[:, :C].argmax(1) + (torch.rand(N, generator=gen) < 0.3)) % C
    labels = torch.stack([y, (y + 1) % C, y])
    return x, labels, torch.randn(40, D, generator=gen)


def _run(loss, data, mode, seeds=(0, 1, 2), protocol=SHORT, labels=None):
    x, default_labels, x_eval = data
    return train_members(mlp((D, 32, C)), loss, x, default_labels if labels is None else labels,
                         list(seeds), protocol, eval_inputs=x_eval, mode=mode)


def _from_source(source: str, name: str = "user_loss"):
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return objective_from_module(module, source, name=name, origin="file")


@pytest.mark.parametrize("name", ["ce", "gce", "focal", "aldr_kl", "boot_hard", "ldr_kl"])
def test_batched_equals_per_seed_loop(name, data):
    loss = load_objective(name).bind("classification_loss")
    batched, looped = _run(loss, data, "vmap"), _run(loss, data, "loop")
    assert batched.mode == "vmap" and looped.mode == "loop"
    torch.testing.assert_close(batched.loss_curve, looped.loss_curve, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched.grad_norm_curve, looped.grad_norm_curve,
                               rtol=1e-4, atol=1e-5)
    for k in batched.params:
        torch.testing.assert_close(batched.params[k], looped.params[k], rtol=1e-4, atol=1e-5)
    agree = (batched.eval_predictions == looped.eval_predictions).float().mean()
    assert agree > 0.99


def test_batched_member_equals_training_that_seed_alone(data):
    """Stacking is only a batch dimension: member k trains exactly as seed k would alone."""
    x, labels, x_eval = data
    loss = load_objective("ce").bind("classification_loss")
    together = _run(loss, data, "vmap", seeds=(0, 1, 2))
    alone = train_members(mlp((D, 32, C)), loss, x, labels[2:3], [2], SHORT,
                          eval_inputs=x_eval, mode="vmap")
    for k in together.params:
        torch.testing.assert_close(together.params[k][2:3], alone.params[k],
                                   rtol=1e-4, atol=1e-5)


def test_unvmappable_objective_falls_back_to_loop_with_same_numbers(data):
    objective = _from_source(
        "import torch.nn.functional as F\n"
        "def classification_loss(logits, targets):\n"
        "    scale = 1.0 if logits.abs().max().item() < 1e9 else 0.0\n"
        "    return scale * F.cross_entropy(logits, targets, reduction='none')\n")
    result = _run(objective.bind("classification_loss"), data, "auto")
    assert result.mode == "loop"
    assert "item" in result.fallback_reason.lower()
    reference = _run(load_objective("ce").bind("classification_loss"), data, "vmap")
    torch.testing.assert_close(result.loss_curve, reference.loss_curve, rtol=1e-4, atol=1e-5)


def test_objective_exception_is_reported_with_cause(data):
    objective = _from_source(
        "def classification_loss(logits, targets, *, progress):\n"
        "    if progress > 0.5:\n"
        "        raise ValueError('boom at half time')\n"
        "    return logits.logsumexp(-1) - logits.gather(-1, targets[:, None])[:, 0]\n")
    with pytest.raises(train.ObjectiveRuntimeError) as info:
        _run(objective.bind("classification_loss"), data, "loop")
    assert isinstance(info.value.__cause__, ValueError)
    assert "boom at half time" in str(info.value)


NAN_WHEN_SAMPLE0_HAS_LABEL3 = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "def classification_loss(logits, targets, *, index, progress):\n"
    "    ce = F.cross_entropy(logits, targets, reduction='none')\n"
    "    poison = (index == 0) & (targets == 3) & (progress >= 0.4)\n"
    "    return torch.where(poison, torch.full_like(ce, float('nan')), ce)\n")


@pytest.mark.parametrize("mode", ["vmap", "loop"])
def test_divergence_marks_only_that_member_at_the_right_step(data, mode):
    x, labels, x_eval = data
    labels = labels.clone()
    labels[:, 0] = torch.tensor([3, 1, 2])  # only member 0 ever sees the poison
    loss = _from_source(NAN_WHEN_SAMPLE0_HAS_LABEL3).bind("classification_loss")
    result = _run(loss, data, mode, labels=labels)

    steps_per_epoch = -(-N // SHORT.batch_size)
    total = steps_per_epoch * SHORT.epochs
    orders = epoch_orders([0, 1, 2], N, SHORT.epochs)
    expected = next(
        e * steps_per_epoch + j
        for e in range(SHORT.epochs) for j in range(steps_per_epoch)
        if (e * steps_per_epoch + j) / total >= 0.4
        and 0 in orders[e, 0, j * SHORT.batch_size:(j + 1) * SHORT.batch_size])
    assert result.diverged_step == [expected, None, None]
    assert torch.isfinite(result.loss_curve[1:]).all()
    # The surviving members are untouched by member 0's NaNs.
    clean = _run(load_objective("ce").bind("classification_loss"), data, mode, labels=labels)
    for k in result.params:
        torch.testing.assert_close(result.params[k][1:], clean.params[k][1:])


def test_same_seed_same_init_and_order_whatever_the_other_members():
    model = mlp((D, 8, C))
    a = stacked_init(model, [3, 5])
    b = stacked_init(model, [5])
    for k in a:
        torch.testing.assert_close(a[k][1], b[k][0])
        assert not torch.equal(a[k][0], a[k][1])
    assert torch.equal(epoch_orders([3, 5], 50, 2)[:, 1], epoch_orders([5], 50, 2)[:, 0])


def test_fused_sgd_matches_torch_sgd_with_per_member_clipping():
    torch.manual_seed(0)
    members = [mlp((6, 5, 3)) for _ in range(3)]
    stacked = {k: torch.stack([dict(m.named_parameters())[k].detach() for m in members])
               for k, _ in members[0].named_parameters()}
    grads = {k: torch.randn_like(v) * torch.tensor([0.1, 10.0, 100.0]).view(-1, *[1] * (v.dim()
             - 1)) for k, v in stacked.items()}
    protocol = Protocol(lr=0.05, momentum=0.9, weight_decay=1e-3, grad_clip=5.0)

    leaves = [v.clone().requires_grad_() for v in stacked.values()]
    buffers = [torch.zeros_like(v) for v in leaves]
    for _ in range(2):  # two steps so the momentum buffer matters
        for leaf, g in zip(leaves, grads.values(), strict=True):
            leaf.grad = g.clone()
        norms = train._grad_norms(leaves, torch.ones(3, dtype=torch.bool))
        train._sgd_step(leaves, buffers, protocol, protocol.lr,
                        train._clip_coefficients(norms, protocol.grad_clip))

    for m, member in enumerate(members):
        ref = copy.deepcopy(member)
        opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
        for _ in range(2):
            for (k, p) in ref.named_parameters():
                p.grad = grads[k][m].clone()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), 5.0)
            opt.step()
        for leaf, p in zip(leaves, ref.parameters(), strict=True):
            torch.testing.assert_close(leaf[m].detach(), p.detach(), rtol=1e-5, atol=1e-6)


def test_lr_schedule_is_cosine_to_zero():
    p = Protocol(lr=0.1)
    assert p.lr_at(0, 100) == pytest.approx(0.1)
    assert p.lr_at(50, 100) == pytest.approx(0.05)
    assert p.lr_at(100, 100) == pytest.approx(0.0, abs=1e-12)
    assert Protocol(lr=0.1, schedule="constant").lr_at(70, 100) == 0.1


def test_predict_is_argmax_of_each_member():
    model = mlp((D, 8, C))
    params = stacked_init(model, [0, 1])
    x = torch.randn(7, D)
    preds = train.predict(model, params, x, chunk=3)
    for m in range(2):
        logits = torch.func.functional_call(model, {k: v[m] for k, v in params.items()}, (x,))
        assert np.array_equal(preds[m].numpy(), logits.argmax(-1).numpy())
