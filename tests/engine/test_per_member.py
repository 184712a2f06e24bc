"""Members that differ in more than their seed (a tuned run's trials,
``harness.train.PerMember``): each steps with its own learning rate and weight decay, as
``torch.optim`` would; hyperparameters reach the hook as tensors under ``vmap``; trials
batched equal trials trained one by one, bit for bit."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch

from harness.models.mlp import mlp
from harness.objectives.loading import load_objective, objective_from_module
from harness.train import (
    Optimizer,
    Shuffled,
    TrainConfig,
    classification_member_loss,
    stacked_init,
    train_members,
)
from harness.train.optim import StackedOptimizer

N, D, C = 96, 12, 4
SHORT = TrainConfig(epochs=1, batch_size=32, optimizer=Optimizer(lr=0.1, momentum=0.9))


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=gen)
    y = (x[:, :C].argmax(1) + (torch.rand(N, generator=gen) < 0.3)) % C
    return x, torch.stack([y, (y + 1) % C, y]), None


def _from_source(source: str):
    module = types.ModuleType("user_loss")
    exec(compile(source, "<user_loss>", "exec"), module.__dict__)
    return objective_from_module(module, source, name="user_loss", origin="file")

PER_MEMBER_OPTIMIZERS = {  # kind: member m's torch.optim at its own lr and decay
    "sgd": lambda ps, lr, wd: torch.optim.SGD(ps, lr=lr, momentum=0.9, weight_decay=wd),
    "sgd-nesterov": lambda ps, lr, wd: torch.optim.SGD(ps, lr=lr, momentum=0.9,
                                                       nesterov=True, weight_decay=wd),
    "adam": lambda ps, lr, wd: torch.optim.Adam(ps, lr=lr, weight_decay=wd, foreach=False),
    "adamw": lambda ps, lr, wd: torch.optim.AdamW(ps, lr=lr, weight_decay=wd, foreach=False),
}


@pytest.mark.parametrize("name", list(PER_MEMBER_OPTIMIZERS))
def test_each_member_steps_with_its_own_learning_rate_and_decay(name):
    kind = name.split("-")[0]
    spec = Optimizer(kind, momentum=0.9 if kind == "sgd" else 0.0, nesterov="nesterov" in name)
    lrs, decays = torch.tensor([0.01, 0.1, 0.03]), torch.tensor([0.0, 1e-2, 1e-3])
    torch.manual_seed(1)
    members = [mlp((6, 5, 3)) for _ in range(3)]
    leaves = [torch.stack([dict(m.named_parameters())[k].detach() for m in members])
              .requires_grad_() for k, _ in members[0].named_parameters()]
    steps = [[torch.randn_like(v) for v in leaves] for _ in range(4)]
    optimizer = StackedOptimizer(leaves, spec, weight_decay=decays)
    for grads in steps:
        for leaf, g in zip(leaves, grads, strict=True):
            leaf.grad = g.clone()
        optimizer.step(lrs * 0.5, torch.ones(3))  # a schedule's factor times each member's lr
    for m, member in enumerate(members):
        opt = PER_MEMBER_OPTIMIZERS[name](list(member.parameters()), 0.5 * float(lrs[m]),
                                          float(decays[m]))
        for grads in steps:
            for p, g in zip(member.parameters(), grads, strict=True):
                p.grad = g[m].clone()
            opt.step()
        for leaf, p in zip(leaves, member.parameters(), strict=True):
            torch.testing.assert_close(leaf[m].detach(), p.detach(), rtol=1e-5, atol=1e-6)


HYPER_LOSS = '''
import torch

def classification_loss(logits, targets, *, q: float = 0.7):
    p = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1).clamp_min(1e-7)
    return (1 - p ** q) / q
'''


def _trials(data, trials, mode="auto", seeds=(0, 1), source=HYPER_LOSS):
    from harness.train.config import PerMember

    x, labels, _ = data
    model = mlp((D, 32, C))
    members = [(t, s) for t in trials for s in seeds]
    member_seeds = [s for _, s in members]
    return train_members(
        classification_member_loss(model, _from_source(source).bind("classification_loss")),
        stacked_init(model, member_seeds),
        Shuffled(member_seeds, 32, 2, shared={"x": x}, own={"y": labels[member_seeds]}),
        TrainConfig(epochs=2, batch_size=32, optimizer=Optimizer(lr=0.1, momentum=0.9)),
        mode=mode, per_member=PerMember(lr=tuple(t["lr"] for t, _ in members),
                                        hyper={"q": tuple(t["q"] for t, _ in members)}))


TRIALS = ({"lr": 0.05, "q": 0.3}, {"lr": 0.2, "q": 0.9}, {"lr": 0.1, "q": 0.6})


def test_trials_batched_equal_trials_trained_one_by_one(data):
    batched = _trials(data, TRIALS)
    alone = [_trials(data, [t]) for t in TRIALS]
    assert batched.mode == "vmap"
    for name, value in batched.params.items():  # bit for bit
        assert torch.equal(value, torch.cat([a.params[name] for a in alone]))
    # each trial's own q and lr reached its members: no two trials trained alike
    first = batched.params["0.weight"]
    assert not torch.equal(first[0], first[2]) and not torch.equal(first[2], first[4])


def test_a_hook_that_branches_on_a_hyperparameter_falls_back_to_the_loop(data):
    branching = HYPER_LOSS.replace("    return (1 - p ** q) / q",
                                   "    if q > 0.5:\n        return -p.log()\n"
                                   "    return (1 - p ** q) / q")
    looped = _trials(data, TRIALS, source=branching)
    assert looped.mode == "loop" and looped.fallback_reason
    # the loop gives each member its own q: the branch a trial takes is its own
    reference = _trials(data, TRIALS, mode="loop", source=branching)
    for name, value in looped.params.items():
        assert torch.equal(value, reference.params[name])
    ce_like = _trials(data, [TRIALS[1]], mode="loop",
                      source=HYPER_LOSS.replace("(1 - p ** q) / q", "-p.log()"))
    torch.testing.assert_close(looped.params["0.weight"][2:4], ce_like.params["0.weight"])


def test_a_branch_on_a_hyperparameter_after_a_warm_up_falls_back_where_it_is_met(data):
    """The branch is first met in the second epoch (certified's fast_ibp meets its ``λ``
    only once ε > 0): the run falls back there, and its numbers are the loop's."""
    late = HYPER_LOSS.replace(
        "def classification_loss(logits, targets, *, q: float = 0.7):",
        "def classification_loss(logits, targets, *, progress, q: float = 0.7):").replace(
        "    return (1 - p ** q) / q",
        "    if progress > 0.5 and q > 0.5:\n        return -p.log()\n"
        "    return (1 - p ** q) / q")
    looped = _trials(data, TRIALS, source=late)
    assert looped.mode == "loop" and looped.fallback_reason
    reference = _trials(data, TRIALS, mode="loop", source=late)
    for name, value in looped.params.items():
        torch.testing.assert_close(value, reference.params[name])


def test_per_member_settings_are_checked():
    from harness.train.config import PerMember

    with pytest.raises(ValueError, match="positive"):
        PerMember(lr=(0.1, -1.0))
    with pytest.raises(ValueError, match="2 values"):
        PerMember(lr=(0.1, 0.2), weight_decay=(0.0,))
    with pytest.raises(ValueError, match="one per member"):
        PerMember(lr=(0.1, 0.2), hyper={"q": (0.5,)})


def test_only_numbers_differ_between_members_of_one_run(data):
    from harness.train.config import PerMember

    x, labels, _ = data
    model = mlp((D, 32, C))
    with pytest.raises(ValueError, match="run each choice apart"):
        train_members(classification_member_loss(model, load_objective("ce").bind(
            "classification_loss")), stacked_init(model, [0, 1]),
            Shuffled([0, 1], 32, 1, shared={"x": x}, own={"y": labels[:2]}), SHORT,
            per_member=PerMember(lr=(0.1, 0.1), hyper={"kind": ("a", "b")}))


def test_a_sandboxed_hook_refuses_per_member_hyperparameters():
    objective = _from_source(HYPER_LOSS)

    def served(*args, **kwargs):  # as harness.sandbox.remote_hook.RemoteHook declares
        raise AssertionError("not called")

    served.takes_hyperparameters = False
    bound = dataclasses.replace(objective, hooks={"classification_loss": served}).bind(
        "classification_loss")
    with pytest.raises(ValueError, match="trains in-process"):
        bound(torch.zeros(2, C), torch.zeros(2, dtype=torch.long), hyper={"q": torch.tensor(.5)})
