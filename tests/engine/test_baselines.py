"""Known-answer, limit and vmap tests for the 15 built-in classification baselines.

Expected values are computed independently with numpy from each formula in
its file's docstring (the papers' definitions), never by calling the loss under test.
"""

import importlib
import inspect
import math

import numpy as np
import pytest
import torch

from harness.train import with_state

NAMES = [
    "ce", "mae", "gce", "sce", "nce_rce", "focal", "taylor_ce", "poly1", "boot_soft",
    "boot_hard", "label_smoothing", "ldr_kl", "aldr_kl", "squentropy", "only_top_p",
]

# Three samples, three classes. Sample 2's label has p_y ~ 0.016 and is not the argmax.
Z = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-2.0, 2.0, 0.0]])
Y = np.array([0, 2, 0])
A_RCE = -math.log(1e-4)


def loss_fn(name):
    return importlib.import_module("harness.objectives.builtin." + name).classification_loss


def run(name, z=Z, y=Y, **kw):
    logits = torch.tensor(z, dtype=torch.float64)
    return loss_fn(name)(logits, torch.tensor(y), **kw)


def run_stateful(name, index, state, z=Z, y=Y, **kw):
    """As the trainer calls a stateful hook: with the batch's slice of ``state``, which
    is stored back at ``index`` afterwards (harness.train.with_state)."""
    fn = loss_fn(name)

    def hook(*args, **context):
        return fn(*args, **kw, **context)

    hook.context = ("state",)
    return with_state(hook, torch.tensor(z, dtype=torch.float64), torch.tensor(y),
                      state=state, index=index)


def np_softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def check(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=torch.float64),
                               rtol=1e-10, atol=1e-12)


P = np_softmax(Z)
PY = P[np.arange(3), Y]
LOGP = np.log(P)
CE = -np.log(PY)


# ---------------------------------------------------------------- known answers


def test_softmax_reference_by_hand():
    # p for sample 0 written out: exp(2), exp(.5), exp(-1) over their sum.
    s = math.exp(2) + math.exp(0.5) + math.exp(-1)
    assert PY[0] == pytest.approx(math.exp(2) / s, rel=1e-14)
    assert PY[2] == pytest.approx(math.exp(-2) / (math.exp(-2) + math.exp(2) + 1), rel=1e-14)


def test_ce():
    check(run("ce"), CE)


def test_mae():
    check(run("mae"), 1 - PY)
    check(run("mae", scale=2.5), 2.5 * (1 - PY))


def test_gce():
    check(run("gce"), (1 - PY**0.7) / 0.7)


def test_sce():
    check(run("sce"), 0.1 * CE + 1.0 * 9.210340371976184 * (1 - PY))
    # RCE written as in the reference: -sum_k p_k log clamp(e_y, 1e-4, 1).
    onehot = np.clip(np.eye(3)[Y], 1e-4, 1)
    rce = -(P * np.log(onehot)).sum(-1)
    check(run("sce", alpha=6.0, beta=0.1), 6.0 * CE + 0.1 * rce)


def test_nce_rce():
    nce = np.log(PY) / LOGP.sum(-1)
    check(run("nce_rce"), nce + A_RCE * (1 - PY))
    check(run("nce_rce", alpha=10.0, beta=0.1), 10 * nce + 0.1 * A_RCE * (1 - PY))


def test_focal():
    check(run("focal"), -((1 - PY) ** 0.5) * np.log(PY))
    check(run("focal", gamma=2.0), -((1 - PY) ** 2) * np.log(PY))


def test_focal_modulating_factor_is_detached():
    logits = torch.tensor(Z[:1], requires_grad=True)
    loss_fn("focal")(logits, torch.tensor(Y[:1])).sum().backward()
    # d/dz of -w * log p_y with w constant is w * (p - e_y).
    w = (1 - PY[0]) ** 0.5
    torch.testing.assert_close(logits.grad, torch.tensor(w * (P[:1] - np.eye(3)[[0]])))


def test_taylor_ce():
    r = 1 - PY
    check(run("taylor_ce"), r + r**2 / 2)
    check(run("taylor_ce", t=4), r + r**2 / 2 + r**3 / 3 + r**4 / 4)


def test_poly1():
    check(run("poly1"), CE + 1.0 * (1 - PY))
    check(run("poly1", epsilon=-1.0), CE - (1 - PY))


def test_boot_soft():
    target = 0.95 * np.eye(3)[Y] + 0.05 * P
    check(run("boot_soft"), -(target * LOGP).sum(-1))


def test_boot_hard():
    target = 0.8 * np.eye(3)[Y] + 0.2 * np.eye(3)[P.argmax(-1)]
    check(run("boot_hard"), -(target * LOGP).sum(-1))
    # Sample 2: label 0, argmax 1, so the two terms differ.
    assert P[2].argmax() != Y[2]


def test_label_smoothing():
    target = 0.9 * np.eye(3)[Y] + 0.1 / 3
    check(run("label_smoothing"), -(target * LOGP).sum(-1))
    logits = torch.tensor(Z)
    ref = torch.nn.functional.cross_entropy(logits, torch.tensor(Y), label_smoothing=0.1,
                                            reduction="none")
    torch.testing.assert_close(run("label_smoothing"), ref)


def np_ldr(f, y, lam, margin):
    k = f.shape[-1]
    f_y = f[np.arange(len(y)), y][:, None]
    d = (f - f_y + margin * (1 - np.eye(k)[y])) / np.asarray(lam).reshape(-1, 1)
    return np.asarray(lam) * np.log(np.exp(d).mean(-1))


def test_ldr_kl():
    sp = np.log1p(np.exp(Z))
    f = sp / sp.mean(-1, keepdims=True)
    check(run("ldr_kl"), np_ldr(f, Y, 10.0, 0.1))
    check(run("ldr_kl", lam=1.0, margin=2.0), np_ldr(f, Y, 1.0, 2.0))


def test_squentropy():
    sq = np.array([0.5**2 + 1.0**2, 0.1**2 + 0.2**2, 2.0**2 + 0.0**2]) / 2
    check(run("squentropy"), CE + sq)


def test_only_top_p():
    # Default q=0.05: sample 2 (p_y ~ 0.016) is masked, the others are MAE.
    assert PY[2] < 0.05 < PY[:2].min()
    check(run("only_top_p"), np.array([1 - PY[0], 1 - PY[1], 0.0]))
    check(run("only_top_p", q=0.0), 1 - PY)
    check(run("only_top_p", q=0.5), np.array([1 - PY[0], 0.0, 0.0]))


# ---------------------------------------------------------------- ALDR-KL (stateful)


def np_aldr(z, y, lam_old, alpha=2.0, lambda0=10.0, margin=0.1):
    """Reference steps of ALDRLoss_V1, in numpy; returns (loss, new lambda)."""
    k = z.shape[-1]
    f = z / (np.abs(z).sum(-1, keepdims=True) / k)
    pi = np_softmax(f / np.reshape(lam_old, (-1, 1))) + 1e-5
    pi = pi / pi.sum(-1, keepdims=True)
    kl = (pi * np.log(k * pi)).sum(-1)
    lam = lambda0 - lambda0 * kl / (alpha * np.log(k))
    reg = alpha * np.log(k) / (2 * lambda0) * (lam - lambda0) ** 2
    return np_ldr(f, y, lam, margin) - reg, lam


def test_aldr_kl_first_call_initialises_then_second_call_reads_state():
    state = torch.full((6,), float("nan"), dtype=torch.float64)
    index = torch.tensor([4, 1, 3])
    hp = {"lambda0": 1.0, "alpha": 2.0}  # a small lambda0 makes lambda move visibly
    loss1 = run_stateful("aldr_kl", index, state, **hp)
    exp1, lam1 = np_aldr(Z, Y, np.full(3, 1.0), lambda0=1.0)
    check(loss1, exp1)
    check(state[index], lam1)
    assert torch.isnan(state[[0, 2, 5]]).all()  # untouched rows stay NaN

    loss2 = run_stateful("aldr_kl", index, state, **hp)
    exp2, lam2 = np_aldr(Z, Y, lam1, lambda0=1.0)
    check(loss2, exp2)
    check(state[index], lam2)
    assert np.abs(lam1 - lam2).max() > 1e-3
    assert (loss1 - loss2).abs().max() > 1e-4


def test_aldr_kl_reads_stored_lambda():
    state = torch.tensor([7.0, float("nan"), 5.5], dtype=torch.float64)
    loss = run_stateful("aldr_kl", torch.tensor([0, 1, 2]), state)
    expected, lam = np_aldr(Z, Y, np.array([7.0, 10.0, 5.5]))
    check(loss, expected)
    check(state, lam)
    fresh = run("aldr_kl", state=torch.full((3,), float("nan")))
    assert (loss - fresh).abs().max() > 1e-6


def test_aldr_kl_writes_only_given_indices():
    state = torch.arange(8, dtype=torch.float32) + 5.0
    before = state.clone()
    index = torch.tensor([7, 0, 2])
    run_stateful("aldr_kl", index, state)
    others = torch.tensor([1, 3, 4, 5, 6])
    assert torch.equal(state[others], before[others])
    assert not torch.equal(state[index], before[index])


@pytest.mark.parametrize("alpha", [1.5, 2.0, 4.0])
def test_aldr_kl_lambda_stays_in_range(alpha):
    g = torch.Generator().manual_seed(0)
    logits = 20 * torch.randn(64, 10, generator=g, dtype=torch.float64)
    logits[0] = 0.0  # zero logits: guarded, uniform pi
    targets = torch.randint(0, 10, (64,), generator=g)
    state = torch.full((64,), float("nan"), dtype=torch.float64)
    fn = loss_fn("aldr_kl")
    for _ in range(3):  # the whole batch: its slice is all of state
        loss = fn(logits, targets, alpha=alpha, state=state)
        assert torch.isfinite(loss).all()
        assert (state >= 10.0 * (1 - 1 / alpha) - 1e-9).all() and (state <= 10.0).all()
    assert state[0].item() == pytest.approx(10.0, abs=1e-6)


def test_aldr_kl_softplus_option():
    state = torch.full((3,), float("nan"), dtype=torch.float64)
    sp = np.log1p(np.exp(Z))
    expected, _ = np_aldr(sp, Y, np.full(3, 10.0))
    check(run_stateful("aldr_kl", torch.arange(3), state, softplus=True), expected)


# ---------------------------------------------------------------- limits


def test_limits():
    ce = run("ce")
    torch.testing.assert_close(run("gce", q=1e-4), ce, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(run("gce", q=1.0), run("mae"))
    torch.testing.assert_close(run("taylor_ce", t=1), run("mae"))
    torch.testing.assert_close(run("taylor_ce", t=3000), ce, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(run("poly1", epsilon=0.0), ce)
    torch.testing.assert_close(run("label_smoothing", epsilon=0.0), ce)
    torch.testing.assert_close(run("boot_soft", beta=1.0), ce)
    torch.testing.assert_close(run("boot_hard", beta=1.0), ce)
    torch.testing.assert_close(run("focal", gamma=0.0), ce)
    torch.testing.assert_close(run("sce", alpha=1.0, beta=0.0), ce)


def test_taylor_ce_approaches_ce_monotonically():
    ce = run("ce")
    gaps = [(ce - run("taylor_ce", t=t)).abs().max().item() for t in (1, 2, 5, 20, 100)]
    assert gaps == sorted(gaps, reverse=True)


# ---------------------------------------------------------------- every baseline


def context_for(fn, seeds, batch, n):
    params = inspect.signature(fn).parameters
    ctx = {}
    if "progress" in params:
        ctx["progress"] = 0.5
    if "state" in params:  # the batch's slice of each seed's memory
        ctx["state"] = torch.full((seeds, batch), float("nan"))
    return ctx


@pytest.mark.parametrize("name", NAMES)
def test_shape_per_sample(name):
    fn = loss_fn(name)
    logits = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    ctx = context_for(fn, 1, 5, 10)
    ctx = {k: v[0] if isinstance(v, torch.Tensor) else v for k, v in ctx.items()}
    out = fn(logits, torch.tensor([0, 1, 2, 3, 0]), **ctx)
    assert out.shape == (5,)
    assert out.dtype == logits.dtype


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_seeds_matches_loop(name):
    seeds, batch, classes, n = 3, 6, 5, 20
    fn = loss_fn(name)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(seeds, batch, classes, generator=g).requires_grad_()
    targets = torch.randint(0, classes, (seeds, batch), generator=g)
    ctx = context_for(fn, seeds, batch, n)
    batched = {k: v for k, v in ctx.items() if isinstance(v, torch.Tensor)}
    scalars = {k: v for k, v in ctx.items() if k not in batched}
    names = list(batched)

    def per_seed(lg, tg, *tensors):
        return fn(lg, tg, **dict(zip(names, tensors, strict=True)), **scalars)

    loop_ctx = {k: v.clone() for k, v in batched.items()}
    out = torch.func.vmap(per_seed)(logits, targets, *batched.values())
    assert out.shape == (seeds, batch)
    assert torch.isfinite(out).all()

    loop = torch.stack([
        per_seed(logits[s], targets[s], *(v[s] for v in loop_ctx.values()))
        for s in range(seeds)
    ])
    torch.testing.assert_close(out, loop)
    for k in names:  # stateful losses update each seed's memory the same way
        torch.testing.assert_close(batched[k], loop_ctx[k], equal_nan=True)

    (grad,) = torch.autograd.grad(out.sum(), logits)
    assert torch.isfinite(grad).all()
    assert grad.abs().sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_finite_gradients_on_extreme_logits(name):
    fn = loss_fn(name)
    logits = torch.tensor([[30.0, -30.0, 0.0], [0.0, 0.0, 0.0], [-50.0, 50.0, 1.0]],
                          requires_grad=True)
    ctx = context_for(fn, 1, 3, 3)
    ctx = {k: v[0] if isinstance(v, torch.Tensor) else v for k, v in ctx.items()}
    out = fn(logits, torch.tensor([0, 1, 0]), **ctx)
    assert torch.isfinite(out).all()
    (grad,) = torch.autograd.grad(out.sum(), logits)
    assert torch.isfinite(grad).all()
