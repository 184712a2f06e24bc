"""The general seed-batched trainer: batched equals the per-seed loop, seeds are isolated,
optimizers equal torch.optim per member, members start from given parameters, samplers
give each member its own batches."""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest
import torch
from torch.func import functional_call

from harness.models.mlp import mlp
from harness.objectives.loading import load_objective, objective_from_module
from harness.train import (
    ObjectiveRuntimeError,
    Optimizer,
    Paired,
    Shuffled,
    TrainConfig,
    classification_member_loss,
    epoch_orders,
    predict,
    stack,
    stacked_init,
    train_members,
)
from harness.train.optim import StackedOptimizer, clip_coefficients, grad_norms

N, D, C = 96, 12, 4
SHORT = TrainConfig(epochs=3, batch_size=32, optimizer=Optimizer(lr=0.1, momentum=0.9))


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=gen)
    y = (x[:, :C].argmax(1) + (torch.rand(N, generator=gen) < 0.3)) % C
    labels = torch.stack([y, (y + 1) % C, y])
    return x, labels, torch.randn(40, D, generator=gen)


def _run(loss, data, mode, seeds=(0, 1, 2), config=SHORT, labels=None, params=None):
    x, default_labels, x_eval = data
    labels = default_labels if labels is None else labels
    model = mlp((D, 32, C))
    seeds = list(seeds)
    return train_members(classification_member_loss(model, loss),
                         stacked_init(model, seeds) if params is None else params,
                         Shuffled(seeds, config.batch_size, config.epochs, shared={"x": x},
                                  own={"y": labels[:len(seeds)]}),
                         config, mode=mode, evaluate=lambda p: predict(model, p, x_eval))


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
    agree = (batched.evaluations == looped.evaluations).float().mean()
    assert agree > 0.99


def test_batched_member_equals_training_that_seed_alone(data):
    """Stacking is only a batch dimension: member k trains exactly as seed k would alone."""
    x, labels, x_eval = data
    loss = load_objective("ce").bind("classification_loss")
    together = _run(loss, data, "vmap", seeds=(0, 1, 2))
    alone = _run(loss, data, "vmap", seeds=(2,), labels=labels[2:3])
    for k in together.params:
        assert torch.equal(together.params[k][2:3], alone.params[k])  # bit for bit


def test_members_start_from_the_given_parameters(data):
    """A pretrained start: zero learning rate leaves each member at its checkpoint, and
    training from checkpoints equals training from the same parameters stacked by hand."""
    model = mlp((D, 32, C))
    checkpoints = [{k: torch.randn_like(v) for k, v in model.named_parameters()}
                   for _ in range(3)]
    start = stack(checkpoints)
    loss = load_objective("ce").bind("classification_loss")
    frozen = _run(loss, data, "vmap", params=start,
                  config=TrainConfig(epochs=1, batch_size=32, optimizer=Optimizer(lr=0.0)))
    for k, v in start.items():
        assert torch.equal(frozen.params[k], v)
    trained = _run(loss, data, "vmap", params=start)
    again = _run(loss, data, "vmap", params={k: v.clone() for k, v in start.items()})
    for k in start:
        assert not torch.equal(trained.params[k], start[k])
        assert torch.equal(trained.params[k], again.params[k])
    with pytest.raises(ValueError, match="same parameter names and shapes"):
        stack([checkpoints[0], {k: v[..., :1] for k, v in checkpoints[1].items()}])


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
    with pytest.raises(ObjectiveRuntimeError) as info:
        _run(objective.bind("classification_loss"), data, "loop")
    assert isinstance(info.value.__cause__, ValueError)
    assert "boom at half time" in str(info.value)


@pytest.mark.parametrize("body", [
    "F.cross_entropy(logits.detach(), targets, reduction='none')",  # no gradient at all
    "_Broken.apply(logits).mean()",  # a backward that raises
])
def test_a_loss_whose_backward_fails_is_the_objectives_failure(data, body):
    objective = _from_source(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "class _Broken(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x.sum(-1)\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        raise ArithmeticError('no way back')\n"
        f"def classification_loss(logits, targets):\n    return {body}\n")
    with pytest.raises(ObjectiveRuntimeError, match="no gradient|no way back"):
        _run(objective.bind("classification_loss"), data, "loop")


NAN_WHEN_SAMPLE0_HAS_LABEL3 = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "def classification_loss(logits, targets, *, progress):\n"
    "    ce = F.cross_entropy(logits, targets, reduction='none')\n"
    "    poison = (targets == 3) & (progress >= 0.4)\n"
    "    return torch.where(poison, torch.full_like(ce, float('nan')), ce)\n")


@pytest.mark.parametrize("mode", ["vmap", "loop"])
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_divergence_marks_only_that_member_at_the_right_step(data, mode, kind):
    x, labels, x_eval = data
    labels = labels.clone()
    labels[labels == 3] = 2  # hooks see no index: label 3 marks sample 0 of member 0 alone
    labels[:, 0] = torch.tensor([3, 1, 2])  # only member 0 ever sees the poison
    config = TrainConfig(epochs=3, batch_size=32, optimizer=Optimizer(kind, lr=0.01))
    loss = _from_source(NAN_WHEN_SAMPLE0_HAS_LABEL3).bind("classification_loss")
    result = _run(loss, data, mode, labels=labels, config=config)

    steps_per_epoch = -(-N // config.batch_size)
    total = steps_per_epoch * config.epochs
    orders = epoch_orders([0, 1, 2], N, config.epochs)
    expected = next(
        e * steps_per_epoch + j
        for e in range(config.epochs) for j in range(steps_per_epoch)
        if (e * steps_per_epoch + j) / total >= 0.4
        and 0 in orders[e, 0, j * config.batch_size:(j + 1) * config.batch_size])
    assert result.diverged_step == [expected, None, None]
    assert torch.isfinite(result.loss_curve[1:]).all()
    for k in result.params:  # frozen at zero, optimizer state included
        assert not result.params[k][0].any()
    # The surviving members are untouched by member 0's NaNs.
    clean = _run(load_objective("ce").bind("classification_loss"), data, mode, labels=labels,
                 config=config)
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


# --- optimizers: equal to torch.optim per member, with clip_grad_norm_ -------------------


OPTIMIZERS = {
    "sgd-momentum-wd": (Optimizer("sgd", lr=0.05, momentum=0.9, weight_decay=1e-3),
                        lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9,
                                                   weight_decay=1e-3)),
    "sgd-nesterov": (Optimizer("sgd", lr=0.05, momentum=0.9, nesterov=True),
                     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)),
    "sgd-plain": (Optimizer("sgd", lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
    "adam": (Optimizer("adam", lr=1e-2), lambda ps: torch.optim.Adam(ps, lr=1e-2,
                                                                      foreach=False)),
    "adam-l2": (Optimizer("adam", lr=1e-2, weight_decay=1e-2, betas=(0.8, 0.99)),
                lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=1e-2, betas=(0.8, 0.99),
                                            foreach=False)),
    "adamw": (Optimizer("adamw", lr=1e-2, weight_decay=0.1, eps=1e-6),
              lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, eps=1e-6,
                                           foreach=False)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_stacked_optimizer_matches_torch_optim_with_per_member_clipping(name):
    spec, make = OPTIMIZERS[name]
    torch.manual_seed(0)
    members = [mlp((6, 5, 3)) for _ in range(3)]
    stacked = {k: torch.stack([dict(m.named_parameters())[k].detach() for m in members])
               for k, _ in members[0].named_parameters()}
    # three gradient scales: member 0 is never clipped, members 1 and 2 always are
    scales = torch.tensor([0.1, 10.0, 100.0])
    steps = [{k: torch.randn_like(v) * scales.view(-1, *[1] * (v.dim() - 1))
              for k, v in stacked.items()} for _ in range(4)]

    leaves = [v.clone().requires_grad_() for v in stacked.values()]
    optimizer = StackedOptimizer(leaves, spec)
    for grads in steps:  # several steps so momentum and bias corrections matter
        for leaf, g in zip(leaves, grads.values(), strict=True):
            leaf.grad = g.clone()
        norms = grad_norms(leaves, torch.ones(3, dtype=torch.bool))
        optimizer.step(spec.lr, clip_coefficients(norms, 5.0))

    for m, member in enumerate(members):
        ref = copy.deepcopy(member)
        opt = make(ref.parameters())
        for grads in steps:
            for (k, p) in ref.named_parameters():
                p.grad = grads[k][m].clone()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), 5.0)
            opt.step()
        for leaf, p in zip(leaves, ref.parameters(), strict=True):
            torch.testing.assert_close(leaf[m].detach(), p.detach(), rtol=1e-5, atol=1e-6)


def test_adam_trains_and_differs_from_sgd(data):
    loss = load_objective("ce").bind("classification_loss")
    adam = _run(loss, data, "vmap", config=TrainConfig(
        epochs=3, batch_size=32, optimizer=Optimizer("adam", lr=1e-2)))
    sgd = _run(loss, data, "vmap")
    assert adam.loss_curve[:, -1].mean() < adam.loss_curve[:, 0].mean()
    assert not torch.equal(adam.params["0.weight"], sgd.params["0.weight"])


def test_settings_are_read_in_one_place():
    config = TrainConfig.from_settings({"epochs": 7, "batch_size": 16, "optimizer": "adamw",
                                        "lr": 3e-4, "weight_decay": 0.01, "betas": [0.9, 0.95],
                                        "lr_schedule": "constant", "grad_clip": None})
    assert config == TrainConfig(7, 16, Optimizer("adamw", lr=3e-4, weight_decay=0.01,
                                                  betas=(0.9, 0.95)), "constant", None)
    with pytest.raises(ValueError, match="unknown optimizer"):
        Optimizer("lion")
    with pytest.raises(ValueError, match="unknown lr_schedule"):
        TrainConfig(lr_schedule="step")


def test_lr_schedule_is_cosine_to_zero():
    p = TrainConfig(optimizer=Optimizer(lr=0.1))
    assert p.lr_at(0, 100) == pytest.approx(0.1)
    assert p.lr_at(50, 100) == pytest.approx(0.05)
    assert p.lr_at(100, 100) == pytest.approx(0.0, abs=1e-12)
    assert TrainConfig(optimizer=Optimizer(lr=0.1), lr_schedule="constant").lr_at(70, 100) == 0.1


# --- samplers ---------------------------------------------------------------------------


def test_shuffled_batches_give_each_member_its_own_order_and_rows():
    x = torch.arange(10.0)[:, None].expand(10, 3)  # sample i holds the value i
    own = torch.stack([torch.arange(10) * 10, torch.arange(10) * 100])  # per member
    tokens = torch.arange(20).view(10, 2)  # token sequences with a mask, shared
    mask = torch.ones(2, 10, 2, dtype=torch.bool)
    sampler = Shuffled([0, 1], 4, 2, shared={"x": x, "tokens": tokens},
                       own={"y": own, "mask": mask})
    assert (sampler.members, sampler.size, sampler.steps_per_epoch) == (2, 10, 3)
    orders = epoch_orders([0, 1], 10, 2)
    seen = {0: [], 1: []}
    for step in range(3):
        b = sampler.batch(1, step)
        assert b["x"].shape[:2] == b["y"].shape == b["index"].shape == b["mask"].shape[:2]
        for m in (0, 1):
            index = orders[1, m, step * 4:(step + 1) * 4]
            assert torch.equal(b["index"][m], index)
            assert torch.equal(b["x"][m, :, 0], index.float())
            assert torch.equal(b["y"][m], index * (10 if m == 0 else 100))
            assert torch.equal(b["tokens"][m], tokens[index])
            seen[m] += index.tolist()
    assert sorted(seen[0]) == sorted(seen[1]) == list(range(10))  # one epoch = every sample
    assert len(sampler.batch(0, 2)["index"][0]) == 2  # the last batch is short


def test_paired_sampler_cycles_the_second_through_its_own_epochs():
    forget = Shuffled([0, 1], 2, 3, shared={"x": torch.arange(4.0)})  # 2 steps per epoch
    needed = Paired.epochs_needed(2, 3, 3)
    retain = Shuffled([0, 1], 3, needed, shared={"x": torch.arange(9.0) + 100},
                      stream=("retain",))
    paired = Paired(forget, retain, ("forget", "retain"))
    assert paired.steps_per_epoch == 2 and paired.size == 4
    retained = []
    for epoch in range(3):
        for step in range(2):
            b = paired.batch(epoch, step)
            assert b["forget"]["x"].max() < 4 and b["retain"]["x"].min() >= 100
            retained += b["retain"]["index"][0].tolist()
    assert sorted(retained[:9]) == list(range(9))  # the retain set's first epoch in full
    # its own order stream: not the forget set's order
    assert not torch.equal(retain.orders[0, :, :4], epoch_orders([0, 1], 9, 1)[0, :, :4])


def test_forget_retain_member_loss_trains_on_paired_batches(data):
    """A loss over paired batches (unlearning's shape) runs seed-batched and looped alike."""
    x, labels, _ = data
    model = mlp((D, 16, C))

    def member_loss(p, batch, state, progress):
        f, r = batch["forget"], batch["retain"]
        forget = torch.nn.functional.cross_entropy(functional_call(model, p, (f["x"],)), f["y"])
        retain = torch.nn.functional.cross_entropy(functional_call(model, p, (r["x"],)), r["y"])
        return retain - 0.1 * forget

    def sampler():
        first = Shuffled([0, 1], 8, 2, shared={"x": x[:16]}, own={"y": labels[:2, :16]})
        second = Shuffled([0, 1], 16, Paired.epochs_needed(2, 2, 5), shared={"x": x[16:]},
                          own={"y": labels[:2, 16:]}, stream=("retain",))
        return Paired(first, second, ("forget", "retain"))

    config = TrainConfig(epochs=2, batch_size=8, optimizer=Optimizer("adam", lr=1e-3))
    runs = [train_members(member_loss, stacked_init(model, [0, 1]), sampler(), config,
                          mode=mode) for mode in ("vmap", "loop")]
    assert [r.mode for r in runs] == ["vmap", "loop"]
    for k in runs[0].params:
        torch.testing.assert_close(runs[0].params[k], runs[1].params[k], rtol=1e-4, atol=1e-5)


def test_predict_is_argmax_of_each_member():
    model = mlp((D, 8, C))
    params = stacked_init(model, [0, 1])
    x = torch.randn(7, D)
    preds = predict(model, params, x, chunk=3)
    for m in range(2):
        logits = functional_call(model, {k: v[m] for k, v in params.items()}, (x,))
        assert np.array_equal(preds[m].numpy(), logits.argmax(-1).numpy())


def test_column_major_weights_train_the_same_model_up_to_rounding(data):
    """The faster layout keeps its strides through training (no copy per step) and learns
    the same model; its numbers differ from the row layout only by float rounding."""
    loss = load_objective("ce").bind("classification_loss")
    rows = _run(loss, data, "vmap")
    columns = _run(loss, data, "vmap", config=TrainConfig(
        epochs=3, batch_size=32, optimizer=Optimizer(lr=0.1, momentum=0.9),
        weight_layout="columns"))
    weight = columns.params["0.weight"]
    assert weight.stride()[1] == 1 and weight.stride()[2] == weight.shape[1]  # column-major
    for k in rows.params:
        torch.testing.assert_close(rows.params[k], columns.params[k], rtol=1e-3, atol=1e-4)
    assert (rows.evaluations == columns.evaluations).float().mean() > 0.99
    with pytest.raises(ValueError, match="unknown weight_layout"):
        TrainConfig(weight_layout="diagonal")


@pytest.mark.parametrize("mode", ["vmap", "loop"])
def test_a_loss_that_never_reaches_a_parameter_leaves_it_unchanged(data, mode):
    """An unlearning loss on a middle layer's hidden states never reaches the layers after
    it: those get no gradient, which is a zero step (AdamW, no decay), not a crash."""
    x, _, _ = data
    model = mlp((D, 16, C))
    start = stacked_init(model, [0, 1])
    unused = [k for k in start if k.startswith("2.")]  # the last linear layer
    assert unused

    def member_loss(p, batch, state, progress):
        hidden = functional_call(model[:1], {k: v for k, v in p.items()
                                             if k.startswith("0.")}, (batch["x"],))
        return hidden.pow(2).mean()

    config = TrainConfig(epochs=1, batch_size=32, optimizer=Optimizer("adamw", lr=1e-2))
    out = train_members(member_loss, start, Shuffled([0, 1], 32, 1, shared={"x": x}), config,
                        mode=mode)
    for k in unused:
        assert torch.equal(out.params[k], start[k]), k
    assert not torch.equal(out.params["0.weight"], start["0.weight"])
