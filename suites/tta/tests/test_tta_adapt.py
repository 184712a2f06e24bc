"""The trusted adaptation loop (suites.tta.adapt) against independent computations: the
prediction counted is made before the update, Adam per member equals torch.optim.Adam,
a zero gradient takes no step, SAM and the reset rule do what they say."""

from __future__ import annotations

import pytest
import torch

from suites.tta import SETTINGS
from suites.tta import adapt as a
from suites.tta import model as m

ARCH = "bn-mlp"
SEEDS = [0, 1, 2]


def source() -> dict[str, torch.Tensor]:
    per = [m.init(ARCH, s) for s in SEEDS]
    return {k: torch.stack([p[k] for p in per]) for k in per[0]}


def entropy(logits):
    p = logits.softmax(-1)
    return -(p * logits.log_softmax(-1)).sum(-1)


def hook(fn, context=()):
    fn.context = tuple(context)
    return fn


def batches(n=3, b=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(len(SEEDS), b, 64, generator=gen) for _ in range(n)]


def adapter(loss=None, adjust=None, opts=None, mode="auto"):
    opts = a.Options() if opts is None else opts
    hooks = {k: v for k, v in (("tta_loss", loss), ("tta_adjust", adjust)) if v is not None}
    return a.Adapter(ARCH, source(), hooks, opts, SETTINGS, mode=mode)


def reference_adam(params, xs, loss_fn, normalization="batch"):
    """One member adapted with torch.optim.Adam on its BN affine parameters."""
    params = {k: v.clone() for k, v in params.items()}
    names = m.affine_names(ARCH)
    leaves = [params[n].requires_grad_(True) for n in names]
    opt = torch.optim.Adam(leaves, lr=SETTINGS["lr"], betas=tuple(SETTINGS["betas"]),
                           eps=SETTINGS["adam_eps"])
    preds = []
    for x in xs:
        logits, _ = m.forward(ARCH, params, x, normalization=normalization)
        preds.append(logits.softmax(-1).detach())
        opt.zero_grad()
        loss_fn(logits).mean().backward()
        opt.step()
    return preds, {n: params[n].detach() for n in names}


@pytest.mark.parametrize("mode", ["vmap", "loop"])
def test_tent_matches_torch_adam_per_member_and_predicts_before_the_update(mode):
    ad = adapter(loss=hook(entropy), mode=mode)
    xs = batches()
    preds = []
    for i, x in enumerate(xs):
        probs, losses, stepped = ad.step(x, i / 3, torch.ones(3, dtype=torch.bool))
        preds.append(probs)
        assert stepped.all() and torch.isfinite(losses).all()
    for j in range(len(SEEDS)):
        want, params = reference_adam({k: v[j] for k, v in source().items()},
                                      [x[j] for x in xs], entropy)
        for got, ref in zip(preds, want, strict=True):
            torch.testing.assert_close(got[j], ref, rtol=1e-5, atol=1e-6)
        for n, value in params.items():
            torch.testing.assert_close(ad.params[n][j], value, rtol=1e-5, atol=1e-6)
    # The first prediction is the source model's with batch statistics: no update yet.
    logits, _ = m.forward(ARCH, {k: v[0] for k, v in source().items()}, xs[0][0])
    torch.testing.assert_close(preds[0][0], logits.softmax(-1))


def test_a_zero_gradient_takes_no_step_for_that_member_only():
    def only_member_zero(logits, *, features):
        # member 0's batch is marked by a first feature value; its loss has no gradient
        skip = (features[0, 0] < -1e8).float()
        return entropy(logits).mean() * (1 - skip)

    ad = adapter(loss=hook(only_member_zero, ["features"]))
    x = batches(1)[0]
    before = {n: ad.params[n].clone() for n in ad.names}
    ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    moved = [any(not torch.equal(ad.params[n][j], before[n][j]) for n in ad.names)
             for j in range(3)]
    assert moved == [True, True, True]

    def nothing(logits):
        return 0 * logits.sum()

    ad = adapter(loss=hook(nothing))
    _, _, stepped = ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    assert not stepped.any()
    for n in ad.names:
        assert torch.equal(ad.params[n], source()[n])
    assert ad.steps.tolist() == [0, 0, 0]


def test_skipping_keeps_each_members_own_adam_step_count():
    calls = {"n": 0}

    def every_other(logits):
        calls["n"] += 1
        return entropy(logits).mean() * (calls["n"] % 2)

    ad = adapter(loss=hook(every_other), mode="loop")  # one call per member per batch
    for x in batches(2):
        ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    # calls 1..6: members 0, 1, 2 then 0, 1, 2; odd calls step.
    assert ad.steps.tolist() == [1, 1, 1]


def test_memory_persists_across_batches_and_resets_with_the_model():
    def counting(logits, *, memory):
        with torch.no_grad():
            memory[0].copy_(torch.where(torch.isnan(memory[0]), torch.zeros(()),
                                        memory[0]) + 1)
        return entropy(logits).mean()

    ad = adapter(loss=hook(counting, ["memory"]))
    xs = batches(3)
    for x in xs:
        ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    assert ad.memory[:, 0].tolist() == [3.0, 3.0, 3.0]
    assert torch.isnan(ad.memory[:, 1:]).all()
    ad._fresh(torch.tensor([False, True, False]))
    assert ad.memory[0, 0] == 3 and torch.isnan(ad.memory[1, 0])
    for n in ad.names:
        assert torch.equal(ad.params[n][1], source()[n][1])


def test_sharpness_aware_step_applies_the_gradient_at_the_perturbed_point():
    rho = 0.05
    ad = adapter(loss=hook(entropy), opts=a.Options(sharpness=rho))
    x = batches(1)[0]
    ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    names = m.affine_names(ARCH)
    for j in range(3):
        p = {k: v[j].clone() for k, v in source().items()}
        leaves = [p[n].requires_grad_(True) for n in names]
        logits, _ = m.forward(ARCH, p, x[j])
        g = torch.autograd.grad(entropy(logits).mean(), leaves)
        norm = torch.sqrt(sum((gi ** 2).sum() for gi in g))
        q = dict(p)
        for n, gi in zip(names, g, strict=True):
            q[n] = (p[n] + rho * gi / norm).detach().requires_grad_(True)
        logits2, _ = m.forward(ARCH, q, x[j])
        g2 = torch.autograd.grad(entropy(logits2).mean(), [q[n] for n in names])
        # Adam's first step moves each coordinate by lr·sign(g) (up to eps).
        for n, gi in zip(names, g2, strict=True):
            want = p[n].detach() - SETTINGS["lr"] * gi / (gi.abs() + SETTINGS["adam_eps"])
            torch.testing.assert_close(ad.params[n][j], want, rtol=0, atol=1e-6)


def test_reset_rule_returns_a_member_to_its_source_when_its_loss_ema_is_low():
    ad = adapter(loss=hook(entropy), opts=a.Options(reset_below=10.0))  # always below
    x = batches(1)[0]
    _, losses, _ = ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    reset = ad.recover(losses, torch.ones(3, dtype=torch.bool))
    assert reset.all()
    for n in ad.names:
        assert torch.equal(ad.params[n], source()[n])
    never = adapter(loss=hook(entropy), opts=a.Options(reset_below=-1.0))
    _, losses, _ = never.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    assert not never.recover(losses, torch.ones(3, dtype=torch.bool)).any()
    ema = adapter(loss=hook(entropy), opts=a.Options(reset_below=0.0))
    ema.recover(torch.tensor([1.0, 2.0, 3.0]), torch.ones(3, dtype=torch.bool))
    ema.recover(torch.tensor([0.0, 0.0, 0.0]), torch.ones(3, dtype=torch.bool))
    torch.testing.assert_close(ema.ema, torch.tensor([0.9, 1.8, 2.7]))


def test_source_normalization_uses_the_running_statistics():
    src = source()
    src["1.running_mean"] += 3.0  # make the two modes disagree
    ad = a.Adapter(ARCH, src, {"tta_adjust": lambda p, f, **_: p},
                   a.Options(normalization="source"), SETTINGS)
    x = batches(1)[0]
    probs, _, _ = ad.step(x, 0.0, torch.ones(3, dtype=torch.bool))
    logits, _ = m.forward(ARCH, {k: v[0] for k, v in src.items()}, x[0],
                          normalization="source")
    torch.testing.assert_close(probs[0], logits.softmax(-1))
    batch_logits, _ = m.forward(ARCH, {k: v[0] for k, v in src.items()}, x[0])
    assert not torch.allclose(probs[0], batch_logits.softmax(-1))


def test_eata_fisher_is_the_mean_squared_pseudo_label_gradient():
    x = torch.rand(40, 64, generator=torch.Generator().manual_seed(3))
    ad = a.Adapter(ARCH, source(), {"tta_loss": hook(entropy, ["fisher"])}, a.Options(),
                   SETTINGS, fisher_x=x, batch_size=16)
    names = m.affine_names(ARCH)
    p = {k: v[1].clone() for k, v in source().items()}
    leaves = [p[n].requires_grad_(True) for n in names]
    total = [torch.zeros_like(t) for t in leaves]
    for lo in (0, 16, 32):
        logits, _ = m.forward(ARCH, p, x[lo:lo + 16])
        g = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, logits.argmax(1)),
                                leaves)
        total = [t + gi ** 2 for t, gi in zip(total, g, strict=True)]
    torch.testing.assert_close(ad.fisher[1], torch.cat(total) / 3)


@pytest.mark.parametrize("declared, message", [
    ({"normalisation": "batch"}, "not an option"),
    ({"normalization": "running"}, "'batch' or 'source'"),
    ({"sharpness": -1.0}, "≥ 0"),
    ({"sharpness": True}, "wrong type"),
    ({"reset_below": float("nan")}, "finite"),
    ([1, 2], "must be a dict"),
])
def test_model_options_are_checked(declared, message):
    with pytest.raises(ValueError, match=message):
        a.options(declared)


def test_model_options_default_and_parse():
    assert a.options(None) == a.Options()
    assert a.options({"sharpness": 0.05, "reset_below": 0.2}) == a.Options("batch", 0.05, 0.2)
