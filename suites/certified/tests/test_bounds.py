"""IBP and CROWN bounds: sound, ordered, exact where they should be, vmappable, differentiable.

Soundness is checked against points the bounds must cover (uniform samples, box vertices,
PGD-found worst cases); tightness against a complete verifier: a MILP of the ReLU network
solved exactly by HiGHS (scipy.optimize.milp), built with its own numpy IBP for big-M so that
it shares no code with the bounds under test.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import Bounds, LinearConstraint, milp
from torch import nn
from torch.func import functional_call, grad, vmap

from harness.models.mlp import mlp
from harness.runner.environment import using_threads
from harness.train import Optimizer, Shuffled, TrainConfig, stacked_init, train_members
from suites.certified import bounds

F64 = torch.float64
CIFAR_MEAN = torch.tensor([0.4914, 0.4822, 0.4465], dtype=F64)
CIFAR_STD = torch.tensor([0.2023, 0.1994, 0.2010], dtype=F64)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny ops: one thread is as fast and is not slowed down by a busy neighbour."""
    with using_threads(1):
        yield


# ----------------------------------------------------------------------------- helpers

def params_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in [*model.named_parameters(), *model.named_buffers()]
            if v.dtype.is_floating_point}


def random_mlp(sizes: tuple[int, ...], seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return mlp(sizes).to(F64)


def conv_bn_net(seed: int, in_channels: int = 1) -> nn.Sequential:
    """conv-BN-ReLU, strided conv-BN-ReLU (8→4: needs output_padding), FC-BN1d-ReLU, FC; eval."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(in_channels, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        nn.Flatten(), nn.Linear(6 * 4 * 4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 10),
    ).to(F64)
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.normal_(0, 0.3)
            m.running_var.uniform_(0.3, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.normal_(0, 0.3)
    return net.eval()


def true_margins(model, x, y):
    z = model(x)
    return z.gather(-1, y[:, None]) - z


def all_bounds(model, x, eps, y, **box):
    p = params_of(model)
    return {"ibp": bounds.ibp_margins(model, p, x, eps, y, **box),
            "crown-ibp": bounds.crown_margins(model, p, x, eps, y, intermediate="ibp", **box),
            "crown": bounds.crown_margins(model, p, x, eps, y, intermediate="crown", **box)}


def box_points(lo, hi, n, gen):
    """[B, n(+V), ...] uniform points in each box, plus all vertices (≤ 6 dims) or random ones."""
    shape = lo.shape[1:]
    u = torch.rand(lo.shape[0], n, *shape, generator=gen, dtype=lo.dtype)
    d = lo[0].numel()
    if d <= 6:
        corners = torch.tensor(list(itertools.product([0.0, 1.0], repeat=d)), dtype=lo.dtype)
        corners = corners.reshape(1, -1, *shape).expand(lo.shape[0], -1, *shape)
    else:
        corners = torch.randint(0, 2, (lo.shape[0], n // 2, *shape), generator=gen).to(lo.dtype)
    return lo[:, None] + (hi - lo)[:, None] * torch.cat([u, corners], 1)


def pgd_min_margins(model, x, y, lo, hi, gen, steps=60):
    """[B, K] smallest margins z_y − z_j found by sign-gradient PGD (one attack per j)."""
    b, k = len(x), model(x[:1]).shape[-1]
    rep = lambda t: t.repeat_interleave(k, 0)  # noqa: E731
    lo_r, hi_r, y_r = rep(lo), rep(hi), rep(y)
    j_r = torch.arange(k).repeat(b)
    xa = lo_r + (hi_r - lo_r) * torch.rand(lo_r.shape, generator=gen, dtype=lo.dtype)
    best = torch.full((b * k,), float("inf"), dtype=lo.dtype)
    for t in range(steps):
        xa = xa.detach().requires_grad_()
        z = model(xa)
        m = z.gather(1, y_r[:, None])[:, 0] - z.gather(1, j_r[:, None])[:, 0]
        best = torch.minimum(best, m.detach())
        (g,) = torch.autograd.grad(m.sum(), xa)
        step = (hi_r - lo_r) * (0.25 if t < steps // 2 else 0.05)
        xa = torch.minimum(torch.maximum(xa - step * g.sign(), lo_r), hi_r)
    with torch.no_grad():
        z = model(xa)
        m = z.gather(1, y_r[:, None])[:, 0] - z.gather(1, j_r[:, None])[:, 0]
    return torch.minimum(best, m).reshape(b, k)


def assert_sound(model, x, y, eps, *, n=2000, seed=0, **box):
    """Every sampled, vertex and PGD point has margins ≥ each bound, every layer's output inside
    its IBP interval and every ReLU input inside its CROWN bounds."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = bounds.input_box(x, eps, **box)
    found = all_bounds(model, x, eps, y, **box)
    pts = box_points(lo, hi, n, gen)
    attacked = pgd_min_margins(model, x, y, lo, hi, gen)
    with torch.no_grad():
        flat = pts.reshape(-1, *x.shape[1:])
        sampled = true_margins(model, flat, y.repeat_interleave(pts.shape[1])).reshape(
            len(x), pts.shape[1], -1).amin(1)
        for name, bound in found.items():
            assert (sampled >= bound - 1e-9).all(), name
            assert (attacked >= bound - 1e-9).all(), name
        def inside(values, box):
            out = values.reshape(len(x), pts.shape[1], *values.shape[1:])
            return (out >= box[0][:, None] - 1e-9).all() and (out <= box[1][:, None] + 1e-9).all()

        layer_in = flat
        intervals = bounds.interval_bounds(model, params_of(model), lo, hi)
        crown_pre = iter(bounds.preactivation_bounds(model, params_of(model), lo, hi,
                                                     method="crown"))
        for layer, box in zip(model, intervals, strict=True):
            if isinstance(layer, nn.ReLU):
                assert inside(layer_in, next(crown_pre))
            layer_in = layer(layer_in)
            assert inside(layer_in, box)
    return found, torch.minimum(sampled, attacked)


# ----------------------------------------------------------------------------- API basics

def test_input_box_clips_and_takes_per_channel_eps():
    x = torch.tensor([[0.0, 0.5, 0.98]], dtype=F64)
    lo, hi = bounds.input_box(x, 0.05)
    assert torch.allclose(lo, torch.tensor([[0.0, 0.45, 0.93]], dtype=F64))
    assert torch.allclose(hi, torch.tensor([[0.05, 0.55, 1.0]], dtype=F64))
    # CIFAR-style: the normalised box is the normalised image of the clipped pixel box
    pix = torch.rand(2, 3, 4, 4, dtype=F64)
    norm = lambda t: (t - CIFAR_MEAN.view(3, 1, 1)) / CIFAR_STD.view(3, 1, 1)  # noqa: E731
    lo, hi = bounds.input_box(norm(pix), 8 / 255 / CIFAR_STD, x_min=-CIFAR_MEAN / CIFAR_STD,
                              x_max=(1 - CIFAR_MEAN) / CIFAR_STD)
    assert torch.allclose(lo, norm((pix - 8 / 255).clamp(0, 1)))
    assert torch.allclose(hi, norm((pix + 8 / 255).clamp(0, 1)))


def test_spec_matrix_rows_and_verified():
    c = bounds.spec_matrix(torch.tensor([2, 0]), 3)
    assert c.shape == (2, 3, 3)
    assert torch.equal(c[0], torch.tensor([[-1.0, 0, 1], [0, -1, 1], [0, 0, 0]]))
    assert torch.equal(c[1], torch.tensor([[0.0, 0, 0], [1, -1, 0], [1, 0, -1]]))
    m = torch.tensor([[0.0, 0.1, 0.2], [0.3, 0.0, 0.0], [-0.1, 0.0, 5.0]])
    assert bounds.verified(m).tolist() == [True, False, False]
    assert torch.equal(bounds.worst_case_logits(m), -m)


def test_zero_at_target_and_exact_at_eps_zero():
    for model, x in [(random_mlp((8, 20, 20, 5), 0), torch.rand(30, 8, dtype=F64)),
                     (conv_bn_net(1), torch.rand(6, 1, 8, 8, dtype=F64))]:
        y = torch.randint(model(x).shape[-1], (len(x),))
        exact = true_margins(model, x, y).detach()
        for name, m in all_bounds(model, x, 0.1, y).items():
            assert (m.gather(1, y[:, None]) == 0).all(), name
        for name, m in all_bounds(model, x, 0.0, y).items():
            torch.testing.assert_close(m, exact, atol=1e-12, rtol=0, msg=name)


def test_unsupported_layers_are_refused():
    x, y = torch.rand(2, 1, 8, 8), torch.tensor([0, 1])
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(18, 3))
    with pytest.raises(NotImplementedError, match="MaxPool2d"):
        bounds.ibp_margins(net, params_of(net), x, 0.1, y)
    with pytest.raises(ValueError):
        bounds.crown_margins(mlp((4, 3)), params_of(mlp((4, 3))), x[:, 0, 0, :4], 0.1, y,
                             intermediate="alpha")


# ----------------------------------------------------------------------------- soundness

@pytest.mark.parametrize("sizes,seed,eps", [((5, 16, 16, 4), 0, 0.1), ((6, 32, 3), 1, 0.3),
                                            ((64, 128, 128, 10), 2, 0.02),
                                            ((10, 24, 24, 24, 6), 3, 0.05)])
def test_sound_on_random_mlps(sizes, seed, eps):
    model = random_mlp(sizes, seed)
    x = torch.rand(8, sizes[0], dtype=F64)
    y = torch.randint(sizes[-1], (8,))
    assert_sound(model, x, y, eps, seed=seed)


def test_sound_on_conv_bn_net_with_cifar_normalisation():
    model = conv_bn_net(4, in_channels=3)
    pix = torch.rand(4, 3, 8, 8, dtype=F64)
    x = (pix - CIFAR_MEAN.view(3, 1, 1)) / CIFAR_STD.view(3, 1, 1)
    y = model(x).argmax(-1)
    found, worst = assert_sound(model, x, y, 2 / 255 / CIFAR_STD, n=1000,
                                x_min=-CIFAR_MEAN / CIFAR_STD, x_max=(1 - CIFAR_MEAN) / CIFAR_STD)
    assert (found["crown"] < worst).any()  # not vacuous: the bounds are below some true values


# ----------------------------------------------------------------------------- ordering

@pytest.mark.parametrize("sizes,eps", [((20, 50, 50, 10), 0.05), ((64, 128, 128, 10), 0.02),
                                       ((8, 30, 30, 30, 4), 0.1), ((10, 40, 5), 0.2)])
def test_crown_tighter_than_ibp_on_random_nets(sizes, eps):
    """CROWN-IBP ≥ IBP and CROWN ≥ IBP elementwise; full CROWN ≥ CROWN-IBP on average and on
    ≥ 90% of the margins (it can lose a little: adaptive slopes are not monotone in [l, u])."""
    model = random_mlp(sizes, sum(sizes))
    x = torch.rand(64, sizes[0], dtype=F64)
    b = all_bounds(model, x, eps, model(x).argmax(-1))
    assert (b["crown-ibp"] >= b["ibp"] - 1e-6).all()
    assert (b["crown"] >= b["ibp"] - 1e-6).all()
    assert b["crown"].mean() >= b["crown-ibp"].mean()
    assert (b["crown"] >= b["crown-ibp"] - 1e-6).double().mean() >= 0.9
    lo, hi = bounds.input_box(x, eps)
    ibp_pre = bounds.preactivation_bounds(model, params_of(model), lo, hi, method="ibp")
    crown_pre = bounds.preactivation_bounds(model, params_of(model), lo, hi, method="crown")
    for (li, ui), (lc, uc) in zip(ibp_pre, crown_pre, strict=True):
        assert (uc - lc).mean() <= (ui - li).mean() + 1e-9


def test_adaptive_crown_can_be_looser_than_ibp():
    """Why the suite takes the per-sample best of IBP and CROWN: h = relu(x), x ∈ [−1, 2],
    margin h. IBP gives relu(−1) = 0 (exact); CROWN's adaptive lower line (u ≥ −l, so slope 1)
    is h ≥ x, whose minimum is −1."""
    model = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 2)).to(F64)
    p = {"0.weight": torch.ones(1, 1, dtype=F64), "0.bias": torch.zeros(1, dtype=F64),
         "2.weight": torch.tensor([[1.0], [0.0]], dtype=F64), "2.bias": torch.zeros(2, dtype=F64)}
    x, y, box = torch.tensor([[0.5]], dtype=F64), torch.tensor([0]), {"x_min": -1.0, "x_max": 2.0}
    assert bounds.ibp_margins(model, p, x, 1.5, y, **box).tolist() == [[0.0, 0.0]]
    for intermediate in ("ibp", "crown"):
        crown = bounds.crown_margins(model, p, x, 1.5, y, intermediate=intermediate, **box)
        assert crown.tolist() == [[0.0, -1.0]]


@pytest.fixture(scope="module")
def digits_model():
    """MLP 64-64-64-10 trained a few epochs with CE on digits in [0, 1]."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target)
    torch.manual_seed(0)
    model = mlp((64, 64, 64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(10):
        for idx in torch.randperm(1500).split(64):
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.to(F64), x[1500:].to(F64), y[1500:]


@pytest.mark.parametrize("eps", [0.05, 0.1])
def test_crown_tighter_than_ibp_on_trained_net(digits_model, eps):
    model, x, y = digits_model
    assert (model(x).argmax(-1) == y).double().mean() > 0.9
    b = all_bounds(model, x, eps, y)
    assert (b["crown-ibp"] >= b["ibp"] - 1e-6).all()
    assert (b["crown"] >= b["ibp"] - 1e-6).all()
    assert b["crown"].mean() >= b["crown-ibp"].mean()
    assert bounds.verified(b["crown"]).sum() >= bounds.verified(b["ibp"]).sum()


# ----------------------------------------------------------------------------- complete verifier

def _numpy_ibp(ws, bs, lo, hi):
    """Pre-activation bounds of every hidden layer (independent of harness.bounds)."""
    out = []
    for w, b in zip(ws[:-1], bs[:-1], strict=True):
        mid, rad = (hi + lo) / 2, (hi - lo) / 2
        lo, hi = w @ mid + b - np.abs(w) @ rad, w @ mid + b + np.abs(w) @ rad
        out.append((lo, hi))
        lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
    return out


def milp_min_margin(ws, bs, lo, hi, y, j):
    """Exact ``min (z_y − z_j)`` over the box: big-M MILP, one binary per ReLU (HiGHS)."""
    pre = _numpy_ibp(ws, bs, lo, hi)
    sizes = [len(lo)] + [len(b) for b in bs[:-1]]
    offsets = np.cumsum([0, sizes[0]] + [3 * n for n in sizes[1:]])  # x, then (z, h, δ) each
    nvar = offsets[-1]
    lb, ub = np.zeros(nvar), np.zeros(nvar)
    integrality = np.zeros(nvar)
    lb[:sizes[0]], ub[:sizes[0]] = lo, hi
    rows, rlo, rhi = [], [], []

    def row(entries, low, high):
        r = np.zeros(nvar)
        for idx, val in entries:
            r[idx] += val
        rows.append(r), rlo.append(low), rhi.append(high)

    prev = np.arange(sizes[0])
    for k, ((l_k, u_k), w, b) in enumerate(zip(pre, ws, bs, strict=False)):
        n, o = sizes[k + 1], offsets[k + 1]
        z, h, d = o + np.arange(n), o + n + np.arange(n), o + 2 * n + np.arange(n)
        lb[z], ub[z] = l_k, u_k
        lb[h], ub[h] = 0.0, np.maximum(u_k, 0)
        lb[d], ub[d] = (l_k >= 0).astype(float), (u_k > 0).astype(float)
        integrality[d] = 1
        for i in range(n):
            row([(z[i], 1.0), *[(prev[q], -w[i, q]) for q in range(len(prev))]], b[i], b[i])
            row([(h[i], 1.0), (z[i], -1.0)], 0.0, np.inf)                      # h ≥ z
            row([(h[i], 1.0), (d[i], -u_k[i])], -np.inf, 0.0)                  # h ≤ u δ
            row([(h[i], 1.0), (z[i], -1.0), (d[i], -l_k[i])], -np.inf, -l_k[i])  # h ≤ z − l(1−δ)
        prev = h
    cost = np.zeros(nvar)
    cost[prev] = ws[-1][y] - ws[-1][j]
    res = milp(cost, integrality=integrality, bounds=Bounds(lb, ub),
               constraints=LinearConstraint(np.array(rows), rlo, rhi),
               options={"mip_rel_gap": 1e-10})
    assert res.success, res.message
    return res.fun + bs[-1][y] - bs[-1][j], res.x[:sizes[0]]


def test_against_exact_milp_verifier():
    """exact min ≥ CROWN ≥ IBP per margin; CROWN-verified ⇒ MILP-verified; MILP
    counterexamples are real (the network at the MILP's minimiser has that negative margin)."""
    counts = dict.fromkeys(
        ["crown_below_exact", "crown_verified", "milp_verified", "milp_falsified", "inputs"], 0)
    for seed in range(3):
        model = random_mlp((4, 8, 8, 3), 10 + seed)
        ws = [m.weight.detach().numpy() for m in model if isinstance(m, nn.Linear)]
        bs = [m.bias.detach().numpy() for m in model if isinstance(m, nn.Linear)]
        x = torch.rand(6, 4, dtype=F64)
        y = model(x).argmax(-1)
        gen = torch.Generator().manual_seed(seed)
        for eps in (0.02, 0.1, 0.3):
            b = all_bounds(model, x, eps, y)
            lo, hi = bounds.input_box(x, eps)
            attacked = pgd_min_margins(model, x, y, lo, hi, gen)
            for i in range(len(x)):
                exact, witness = torch.zeros(3, dtype=F64), torch.zeros(3, dtype=F64)
                for j in {0, 1, 2} - {int(y[i])}:
                    value, x_star = milp_min_margin(ws, bs, lo[i].numpy(), hi[i].numpy(),
                                                    int(y[i]), j)
                    exact[j] = value
                    x_star = torch.from_numpy(x_star)[None]
                    at_star = true_margins(model, x_star, y[i:i + 1]).detach()
                    witness[j] = at_star[0, j]
                    assert abs(float(at_star[0, j]) - value) < 1e-6  # the minimum is attained
                    assert (x_star >= lo[i] - 1e-9).all() and (x_star <= hi[i] + 1e-9).all()
                    assert attacked[i, j] >= value - 1e-6             # and nothing goes below it
                assert (exact >= b["crown"][i] - 1e-6).all()
                assert (exact >= b["crown-ibp"][i] - 1e-6).all()
                assert (b["crown-ibp"][i] >= b["ibp"][i] - 1e-6).all()
                assert (b["crown"][i] >= b["ibp"][i] - 1e-6).all()
                milp_ok = bool((exact > 0).sum() == 2)
                counts["crown_below_exact"] += bool((exact > b["crown"][i] + 1e-6).any())
                if not milp_ok:  # a real counterexample: x_star is in the box, margin < 0
                    assert witness.min() < 0
                if bounds.verified(b["crown"][i:i + 1]) or bounds.verified(b["ibp"][i:i + 1]):
                    assert milp_ok
                    counts["crown_verified"] += 1
                counts["milp_verified"] += milp_ok
                counts["milp_falsified"] += not milp_ok
                counts["inputs"] += 1
    # not vacuous: some inputs verified by CROWN, some falsified with a counterexample, and
    # CROWN strictly below the exact minimum somewhere (54 inputs: 42 / 12 / 23 at writing)
    assert counts["crown_verified"] > 0 and counts["milp_falsified"] > 0, counts
    assert counts["crown_below_exact"] > 0, counts
    assert counts["milp_verified"] >= counts["crown_verified"]


# ----------------------------------------------------------------------------- vmap and grads

def stacked(models):
    ps = [params_of(m) for m in models]
    return {k: torch.stack([p[k] for p in ps]) for k in ps[0]}


METHODS = {
    "ibp": lambda m, p, x, y: bounds.ibp_margins(m, p, x, 0.05, y),
    "crown-ibp": lambda m, p, x, y: bounds.crown_margins(m, p, x, 0.05, y, intermediate="ibp"),
    "crown": lambda m, p, x, y: bounds.crown_margins(m, p, x, 0.05, y),
}


@pytest.mark.parametrize("kind", ["mlp", "conv"])
@pytest.mark.parametrize("method", list(METHODS))
def test_vmap_over_members_equals_loop(kind, method):
    fn = METHODS[method]
    if kind == "mlp":
        members = [random_mlp((12, 20, 20, 5), s) for s in range(3)]
        xs = torch.rand(3, 7, 12, dtype=F64)
    else:
        members = [conv_bn_net(s) for s in range(3)]
        xs = torch.rand(3, 5, 1, 8, 8, dtype=F64)
    model, p = copy.deepcopy(members[0]), stacked(members)
    ys = torch.randint(5, (3, len(xs[0])))
    shared = vmap(lambda q: fn(model, q, xs[0], ys[0]))(p)
    batched = vmap(lambda q, x, y: fn(model, q, x, y))(p, xs, ys)
    for m in range(3):
        one = {k: v[m] for k, v in p.items()}
        torch.testing.assert_close(shared[m], fn(model, one, xs[0], ys[0]), atol=1e-12, rtol=0)
        torch.testing.assert_close(batched[m], fn(model, one, xs[m], ys[m]), atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", list(METHODS))
def test_gradients_flow_through_bounds(method):
    fn = METHODS[method]
    members = [conv_bn_net(s) for s in range(3)]
    model, p = copy.deepcopy(members[0]), stacked(members)
    x, y = torch.rand(3, 5, 1, 8, 8, dtype=F64), torch.randint(10, (3, 5))

    def loss(q, xb, yb):
        return F.cross_entropy(bounds.worst_case_logits(fn(model, q, xb, yb)), yb)

    grads = vmap(grad(loss))(p, x, y)
    for m in range(3):
        one = {k: v[m].clone().requires_grad_() for k, v in p.items()}
        loss(one, x[m], y[m]).backward()
        for k, g in grads.items():
            assert torch.isfinite(g).all(), k
            torch.testing.assert_close(g[m], one[k].grad, atol=1e-10, rtol=1e-8)
    assert grads["0.weight"].abs().sum() > 0 and grads["10.weight"].abs().sum() > 0


def test_ibp_training_runs_batched_in_the_trainer():
    """An IBP member loss trains under the trainer's vmap, as in its per-member loop."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(64, 6, generator=gen)
    labels = (x[:, :3].argmax(1)).expand(2, -1).contiguous()
    model = mlp((6, 16, 16, 3))

    def member_loss(p, batch, state, progress):
        xb, yb = batch["x"], batch["y"]
        clean = F.cross_entropy(functional_call(model, p, (xb,)), yb)
        margins = bounds.ibp_margins(model, p, xb, 0.05 * progress, yb)
        return 0.5 * clean + 0.5 * F.cross_entropy(bounds.worst_case_logits(margins), yb)

    config = TrainConfig(epochs=2, batch_size=16, optimizer=Optimizer(lr=0.05))
    runs = {mode: train_members(member_loss, stacked_init(model, [0, 1]),
                                Shuffled([0, 1], 16, 2, shared={"x": x}, own={"y": labels}),
                                config, mode=mode) for mode in ("vmap", "loop")}
    assert runs["vmap"].mode == "vmap" and not runs["vmap"].fallback_reason
    for k, v in runs["vmap"].params.items():
        torch.testing.assert_close(v, runs["loop"].params[k], atol=1e-5, rtol=1e-4)
    assert torch.isfinite(runs["vmap"].loss_curve).all()


def test_batch_statistics_bound_the_train_mode_network():
    model = conv_bn_net(7)
    x, y = torch.rand(16, 1, 8, 8, dtype=F64), torch.randint(10, (16,))
    p = params_of(model)
    with_batch = {**p, **bounds.batch_statistics(model, p, x)}
    train_mode = copy.deepcopy(model).train()
    exact = true_margins(train_mode, x, y).detach()
    torch.testing.assert_close(bounds.ibp_margins(model, with_batch, x, 0.0, y), exact,
                               atol=1e-10, rtol=0)


def test_ibp_elision_is_tighter_than_logit_intervals():
    """The one-Linear fast path equals the general C-folding path (a trailing Flatten forces
    it) and is never looser than subtracting logit intervals, l_y − u_j."""
    model = random_mlp((10, 30, 30, 6), 5)
    folded = nn.Sequential(*model, nn.Flatten())
    x = torch.rand(40, 10, dtype=F64)
    y = torch.randint(6, (40,))
    fast = bounds.ibp_margins(model, params_of(model), x, 0.1, y)
    general = bounds.ibp_margins(folded, params_of(model), x, 0.1, y)
    torch.testing.assert_close(fast, general, atol=1e-12, rtol=0)
    lo, hi = bounds.interval_bounds(model, params_of(model), *bounds.input_box(x, 0.1))[-1]
    naive = lo.gather(1, y[:, None]) - hi
    naive = naive.scatter(1, y[:, None], 0.0)
    assert (fast >= naive - 1e-12).all() and (fast > naive + 1e-6).any()


def test_fused_relu_linear_substitution_equals_the_two_step_one(monkeypatch):
    """ReLU and Linear substituted at once (every intermediate bound) = the two-step way, to
    float64 rounding; with a bias-free Linear after a Flatten too."""
    torch.manual_seed(0)
    flat = nn.Sequential(nn.Flatten(), nn.Linear(12, 20, bias=False), nn.ReLU(),
                         nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5)).double()
    for model, shape in [(random_mlp((8, 30, 30, 30, 4), 3), (8,)), (flat, (3, 4))]:
        x = torch.rand(16, *shape, dtype=F64)
        p, lo, hi, y, both = params_of(model), *bounds.input_box(x, 0.1), model(x).argmax(-1), []
        for fused in (True, False):
            monkeypatch.setattr(bounds, "FUSE_RELU_LINEAR", fused)
            both.append([bounds.crown_margins(model, p, x, 0.1, y), *itertools.chain(
                *bounds.preactivation_bounds(model, p, lo, hi, method="crown"))])
        for got, want in zip(*both, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
