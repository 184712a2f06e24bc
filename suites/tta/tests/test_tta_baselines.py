"""Known-answer tests of the TTA baselines (suites/tta/baselines): each loss against an
independent numpy/scipy formula, under torch.func.vmap against a per-member loop (values,
gradients and EATA's memory writes), and LAME against a numpy re-implementation."""

from __future__ import annotations

import importlib.util
import inspect
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from scipy.special import softmax as np_softmax
from scipy.stats import entropy as np_entropy
from torch.func import vmap

BASELINES = Path(__file__).resolve().parents[1] / "baselines"


def load(name: str) -> ModuleType:
    """A baseline loaded by path (independent of whatever suites/tta/__init__.py does)."""
    spec = importlib.util.spec_from_file_location(f"_tta_baseline_{name}", BASELINES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


source, bn_stats, tent, eata, sar, shot_im, pseudo_label, lame = (
    load(n) for n in ("source", "bn_stats", "tent", "eata", "sar", "shot_im", "pseudo_label",
                      "lame"))

LOGITS_3x3 = [[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-3.0, 4.0, 0.0]]


def t64(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def grad_wrt(fn, z: torch.Tensor, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    z = z.clone().requires_grad_(True)
    loss = fn(z, **kw)
    loss = loss.mean() if loss.dim() else loss
    (g,) = torch.autograd.grad(loss, z)
    return loss.detach(), g


# --- source, BN-1 and the MODEL declarations ---

def test_identity_baselines_and_models():
    p = torch.softmax(torch.randn(5, 4), -1)
    f = torch.randn(5, 7)
    for mod in (source, bn_stats):
        assert torch.equal(mod.tta_adjust(p, f), p)
        assert not hasattr(mod, "tta_loss")
    assert source.MODEL == {"normalization": "source"}
    assert lame.MODEL == {"normalization": "source"}
    assert getattr(bn_stats, "MODEL", {}).get("normalization", "batch") == "batch"
    assert sar.MODEL == {"sharpness": 0.05, "reset_below": 0.2}
    for mod in (tent, eata, shot_im, pseudo_label):
        assert not hasattr(mod, "MODEL")


def test_documented_defaults():
    def defaults(fn):
        return {n: p.default for n, p in inspect.signature(fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    assert defaults(eata.tta_loss) == {"e_margin": 0.4, "d_margin": 0.4, "fisher_alpha": 1.0}
    assert defaults(sar.tta_loss) == {"e_margin": 0.4}
    assert defaults(pseudo_label.tta_loss) == {"threshold": 0.9}
    assert defaults(lame.tta_adjust) == {"affinity": "knn", "knn": 5}
    assert defaults(tent.tta_loss) == defaults(shot_im.tta_loss) == {}
    # EATA's context: no features, and every context value is keyword-only without default.
    ctx = {n for n, p in inspect.signature(eata.tta_loss).parameters.items()
           if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty}
    assert ctx == {"memory", "params", "source_params", "fisher"}


# --- TENT ---

def test_tent_known_answer():
    z = np.array(LOGITS_3x3)
    expected = np.array([np_entropy(np_softmax(r)) for r in z])
    out = tent.tta_loss(t64(z))
    assert out.shape == (3,)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    # uniform logits: ln K
    assert tent.tta_loss(torch.zeros(2, 5, dtype=torch.float64)).allclose(
        torch.full((2,), math.log(5), dtype=torch.float64))


# --- SHOT-IM ---

def test_shot_im_known_answer():
    z = np.array(LOGITS_3x3)
    p = np_softmax(z, axis=1)
    expected = np.mean([np_entropy(r) for r in p]) - np_entropy(p.mean(0))
    assert shot_im.tta_loss(t64(z)).item() == pytest.approx(expected, abs=1e-8)
    # entropy minus diversity: TENT's mean minus the entropy of the mean prediction
    zt = torch.randn(8, 6, dtype=torch.float64)
    diversity = np_entropy(torch.softmax(zt, -1).mean(0).numpy())
    assert shot_im.tta_loss(zt).item() == pytest.approx(
        tent.tta_loss(zt).mean().item() - diversity, abs=1e-8)


def test_shot_im_uniform_mean_batch():
    # the rows are cyclic shifts of one another: the mean prediction is uniform, H = ln 3
    row = np.array([3.0, 1.0, -2.0])
    z = np.stack([np.roll(row, s) for s in range(3)])
    expected = np_entropy(np_softmax(row)) - math.log(3)
    assert shot_im.tta_loss(t64(z)).item() == pytest.approx(expected, abs=1e-8)


# --- pseudo-labelling ---

def test_pseudo_label_known_answer():
    p = np.array([[0.95, 0.03, 0.02], [0.5, 0.3, 0.2], [0.04, 0.92, 0.04]])
    z = t64(np.log(p))
    expected = (-math.log(0.95) - math.log(0.92)) / 2
    loss, g = grad_wrt(pseudo_label.tta_loss, z)
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert torch.all(g[1] == 0) and g[0].abs().sum() > 0 and g[2].abs().sum() > 0
    # the gradient of −log p_{i,y} / n_sel is (p_i − onehot_y) / n_sel on selected rows
    np.testing.assert_allclose(g[0].numpy(), (p[0] - [1, 0, 0]) / 2, atol=1e-12)
    # a lower threshold takes the 0.5 row too
    loss2 = pseudo_label.tta_loss(z, threshold=0.4)
    assert loss2.item() == pytest.approx((-math.log(0.95) - math.log(0.5) - math.log(0.92)) / 3)


def test_pseudo_label_threshold_boundary_and_skip():
    def row(top):
        return [top, (1 - top) / 2, (1 - top) / 2]
    above, below = row(0.9 + 1e-6), row(0.9 - 1e-6)
    z = t64(np.log([above, below]))
    assert pseudo_label.tta_loss(z).item() == pytest.approx(-math.log(0.9 + 1e-6), abs=1e-12)
    # none above τ: loss 0, gradient exactly zero, finite
    loss, g = grad_wrt(pseudo_label.tta_loss, t64(np.log([below, row(0.5)])))
    assert loss.item() == 0 and torch.all(g == 0)


# --- SAR ---

def test_sar_known_answer_and_selection():
    z = t64([[4.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.1, 0.0, 0.0]])
    h = np.array([np_entropy(np_softmax(r)) for r in z.numpy()])
    e0 = 0.4 * math.log(3)
    sel = h < e0
    assert sel.tolist() == [True, False, True, False]
    loss, g = grad_wrt(sar.tta_loss, z)
    assert loss.item() == pytest.approx(h[sel].mean(), abs=1e-12)
    assert torch.all(g[~torch.from_numpy(sel)] == 0)
    assert torch.all(g[torch.from_numpy(sel)].abs().sum(1) > 0)
    # a looser margin selects every row: TENT's mean
    assert sar.tta_loss(z, e_margin=1.0).item() == pytest.approx(h.mean(), abs=1e-12)


def test_sar_no_reliable_sample_is_a_zero_gradient_loss():
    z = t64([[0.1, 0.0, 0.0], [0.0, 0.3, 0.2]])
    loss, g = grad_wrt(sar.tta_loss, z)
    assert torch.all(g == 0)
    # its value: the batch's mean entropy, detached (≥ E₀, so no spurious recovery reset)
    h = np.array([np_entropy(np_softmax(r)) for r in z.numpy()])
    assert loss.item() == pytest.approx(h.mean(), abs=1e-12) and loss.item() >= 0.4 * math.log(3)


# --- EATA ---

def eata_np(z, m, theta, theta0, fisher, e_margin=0.4, d_margin=0.4, alpha=1.0):
    """EATA's loss, selection and new running mean, with explicit loops (m None: unset)."""
    k = z.shape[1]
    e0 = e_margin * math.log(k)
    chosen, terms = [], []
    for i, row in enumerate(z):
        p = np_softmax(row)
        h = np_entropy(p)
        if h >= e0:
            continue
        if m is not None and abs(m @ p / (np.linalg.norm(m) * np.linalg.norm(p))) >= d_margin:
            continue
        chosen.append(i)
        terms.append(math.exp(e0 - h) * h)
    if not chosen:
        return 0.0, m, chosen
    loss = sum(terms) / len(chosen) + alpha * float(np.sum(fisher * (theta - theta0) ** 2))
    mean = np_softmax(z[chosen], axis=1).mean(0)
    return loss, (mean if m is None else 0.9 * m + 0.1 * mean), chosen


Z_EATA = np.array([[4.0, 0.0, 0.0], [0.0, 3.5, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
P = 6
THETA = np.linspace(-1.0, 1.5, P)
THETA0 = np.linspace(0.5, -0.5, P)
FISHER = np.array([0.1, 2.0, 0.0, 0.5, 1.5, 0.3])


def run_eata(z, memory, **hp):
    """Loss and gradients (logits, params) of eata.tta_loss; memory is written in place."""
    z = t64(z).requires_grad_(True)
    theta = t64(THETA).requires_grad_(True)
    loss = eata.tta_loss(z, memory=memory, params=theta, source_params=t64(THETA0),
                         fisher=t64(FISHER), **hp)
    gz, gt = torch.autograd.grad(loss, (z, theta))
    return loss.item(), gz, gt


def fresh_memory(m=None) -> torch.Tensor:
    memory = torch.full((64,), float("nan"), dtype=torch.float64)
    if m is not None:
        memory[:len(m)] = t64(m)
    return memory


def test_eata_first_batch_entropy_filter_weights_fisher_and_memory():
    memory = fresh_memory()
    loss, gz, gt = run_eata(Z_EATA, memory)
    expected, m_new, chosen = eata_np(Z_EATA, None, THETA, THETA0, FISHER)
    assert chosen == [0, 1, 3]  # row 2 is above E₀
    assert loss == pytest.approx(expected, abs=1e-12)
    assert torch.all(gz[2] == 0) and torch.all(gz[[0, 1, 3]].abs().sum(1) > 0)
    # the Fisher term's gradient with respect to the parameters: 2 α F (θ − θ₀)
    np.testing.assert_allclose(gt.numpy(), 2 * FISHER * (THETA - THETA0), atol=1e-12)
    _, _, gt3 = run_eata(Z_EATA, fresh_memory(), fisher_alpha=3.0)
    np.testing.assert_allclose(gt3.numpy(), 6 * FISHER * (THETA - THETA0), atol=1e-12)
    # first write: m = mean of the selected samples' probabilities; the rest stays NaN
    np.testing.assert_allclose(memory[:3].numpy(), m_new, atol=1e-12)
    assert torch.isnan(memory[3:]).all()


def test_eata_weights_are_detached():
    # one selected sample: d/dz [exp(E₀ − H) H] with the weight constant is w · dH/dz
    z = t64([[4.0, 0.0, 0.0]]).requires_grad_(True)
    loss = eata.tta_loss(z, memory=fresh_memory(), params=t64(THETA0), source_params=t64(THETA0),
                         fisher=t64(FISHER))
    (g,) = torch.autograd.grad(loss, z)
    z2 = z.detach().clone().requires_grad_(True)
    (dh,) = torch.autograd.grad(tent.tta_loss(z2).sum(), z2)
    h = tent.tta_loss(z.detach()).item()
    torch.testing.assert_close(g, math.exp(0.4 * math.log(3) - h) * dh)


def test_eata_cosine_filter_only_once_memory_is_set():
    m = np.array([0.9, 0.05, 0.05])
    memory = fresh_memory(m)
    loss, gz, _ = run_eata(Z_EATA, memory)
    expected, m_new, chosen = eata_np(Z_EATA, m, THETA, THETA0, FISHER)
    assert chosen == [1, 3]  # row 0 is reliable but redundant with m
    assert loss == pytest.approx(expected, abs=1e-12)
    assert torch.all(gz[[0, 2]] == 0) and torch.all(gz[[1, 3]].abs().sum(1) > 0)
    # m ← 0.9 m + 0.1 · mean of the samples passing both filters
    np.testing.assert_allclose(memory[:3].numpy(), m_new, atol=1e-12)
    mean13 = np_softmax(Z_EATA[[1, 3]], axis=1).mean(0)
    np.testing.assert_allclose(memory[:3].numpy(), 0.9 * m + 0.1 * mean13, atol=1e-12)
    # a looser d_margin lets row 0 through
    _, gz2, _ = run_eata(Z_EATA, fresh_memory(m), d_margin=1.01)
    assert gz2[0].abs().sum() > 0


@pytest.mark.parametrize("m", [None, [0.2, 0.3, 0.5]])
def test_eata_nothing_selected_is_skipped(m):
    z = np.array([[2.0, 0.0, 0.0], [0.0, 0.3, 0.1]])  # both above E₀
    memory = fresh_memory(m)
    before = memory.clone()
    loss, gz, gt = run_eata(z, memory)
    assert loss == 0.0
    assert torch.all(gz == 0) and torch.all(gt == 0)  # Fisher term too: no step at all
    assert torch.equal(torch.isnan(memory), torch.isnan(before))
    assert torch.equal(memory.nan_to_num(), before.nan_to_num())


# --- every loss under vmap equals the per-member loop ---

M, B, K = 3, 8, 4


def _member_inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(M, B, K, generator=g) * 3.0
    logits[1] *= 0.1  # member 1: nothing confident (the skip branches under vmap)
    memory = torch.full((M, 64), float("nan"))
    memory[2, :K] = torch.softmax(torch.randn(K, generator=g), -1)  # member 2: m already set
    return {"logits": logits, "memory": memory,
            "params": torch.randn(M, 10, generator=g),
            "source_params": torch.randn(M, 10, generator=g),
            "fisher": torch.rand(M, 10, generator=g)}


def _reduced(hook, **hp):
    def one(z, *ctx_values, names=()):
        out = hook(z, **dict(zip(names, ctx_values, strict=True)), **hp)
        return out.mean() if out.dim() else out
    return one


CASES = [
    (tent, (), {}),
    (shot_im, (), {}),
    (pseudo_label, (), {"threshold": 0.8}),
    (sar, (), {}),
    (eata, ("memory", "params", "source_params", "fisher"), {}),
    (eata, ("memory", "params", "source_params", "fisher"), {"d_margin": 0.9, "e_margin": 0.6}),
]


@pytest.mark.parametrize("mod,names,hp", CASES,
                         ids=["tent", "shot_im", "pseudo_label", "sar", "eata", "eata_loose"])
def test_vmap_matches_loop(mod, names, hp):
    inputs = _member_inputs()
    one = _reduced(mod.tta_loss, **hp)

    def run(vmapped: bool):
        data = {k: v.clone() for k, v in inputs.items()}
        z = data["logits"].requires_grad_(True)
        theta = data["params"].requires_grad_(True)
        ctx = [data[n] for n in names]
        if vmapped:  # as the suite calls it: vmap over members, autograd outside
            losses = vmap(lambda zz, *c: one(zz, *c, names=names))(z, *ctx)
        else:
            losses = torch.stack([one(z[i], *(c[i] for c in ctx), names=names)
                                  for i in range(M)])
        leaves = (z, theta) if "params" in names else (z,)
        grads = torch.autograd.grad(losses.sum(), leaves, allow_unused=True)
        return losses.detach(), grads, data["memory"]

    lv, gv, memv = run(True)
    ll, gl, meml = run(False)
    torch.testing.assert_close(lv, ll)
    assert torch.isfinite(lv).all()
    for a, b in zip(gv, gl, strict=True):
        torch.testing.assert_close(a, b)
    if mod is eata:  # the in-place writes under vmap land the loop's values
        assert torch.equal(torch.isnan(memv), torch.isnan(meml))
        torch.testing.assert_close(memv.nan_to_num(), meml.nan_to_num())
        assert not torch.isnan(memv[0, :K]).any()  # member 0 wrote its first m
        assert not torch.equal(memv[2, :K], inputs["memory"][2, :K])  # member 2 updated its m
        assert torch.isnan(memv[:, K:]).all()


def test_vmap_member_without_selection_gets_zero_gradient():
    inputs = _member_inputs()
    z = inputs["logits"].requires_grad_(True)
    for mod in (sar, pseudo_label):
        losses = vmap(_reduced(mod.tta_loss))(z)
        (g,) = torch.autograd.grad(losses.sum(), z)
        assert torch.all(g[1] == 0) and g[0].abs().sum() > 0


# --- LAME ---

def lame_np(probs: np.ndarray, feats: np.ndarray, affinity: str, knn: int) -> np.ndarray:
    """An independent numpy LAME: affinities with explicit loops, then the bound iterations."""
    b = len(probs)
    if b == 1:
        return probs
    x = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    d = np.array([[np.sqrt(np.sum((x[i] - x[j]) ** 2)) for j in range(b)] for i in range(b)])
    if affinity == "knn":
        w = np.zeros((b, b))
        for i in range(b):
            others = [j for j in np.argsort(d[i], kind="stable") if j != i]
            w[i, others[:min(knn, b - 1)]] = 1.0
    elif affinity == "rbf":
        sigma = np.mean([np.sort(d[i])[min(knn, b) - 1] for i in range(b)])
        # σ = 0 (k = 1: the k-th smallest distance is d_ii): the reference's 0/0; here W = I
        w = np.eye(b) if sigma == 0 else np.exp(-d ** 2 / (2 * sigma ** 2))
    else:
        w = x @ x.T
    unary = -np.log(probs + 1e-10)
    y = np_softmax(-unary, axis=1)
    old = np.inf
    for step in range(100):
        pairwise = w @ y
        y = np_softmax(pairwise - unary, axis=1)
        e = np.sum(unary * y - pairwise * y + y * np.log(np.maximum(y, 1e-20)))
        if step > 1 and abs(e - old) <= 1e-8 * abs(old):
            break
        old = e
    return y


def _batch(b: int, k: int = 4, d: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    probs = np_softmax(rng.normal(size=(b, k)) * 2, axis=1)
    feats = np.maximum(rng.normal(size=(b, d)), 0) + 0.05  # post-ReLU-like
    return probs, feats


@pytest.mark.parametrize("affinity", ["rbf", "knn", "linear"])
@pytest.mark.parametrize("b,knn", [(12, 5), (12, 3), (4, 5), (4, 3), (2, 5), (6, 1)])
def test_lame_matches_numpy(affinity, b, knn):
    probs, feats = _batch(b)
    out = lame.tta_adjust(t64(probs), t64(feats), affinity=affinity, knn=knn)
    assert out.shape == probs.shape and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), lame_np(probs, feats, affinity, knn), atol=1e-10)
    assert (out >= 0).all() and out.sum(1).allclose(torch.ones(b, dtype=torch.float64))


def test_lame_affinities_explicitly():
    x = torch.nn.functional.normalize(t64(_batch(4)[1]), dim=-1)
    # k ≥ B − 1: every other sample is a neighbour, never itself
    w = lame.affinity_matrix(x, "knn", 5)
    assert torch.equal(w, 1 - torch.eye(4, dtype=torch.float64))
    w2 = lame.affinity_matrix(x, "knn", 2)
    assert (w2.sum(1) == 2).all() and (w2.diagonal() == 0).all()
    rbf = lame.affinity_matrix(x, "rbf", 5)
    assert torch.allclose(rbf.diagonal(), torch.ones(4, dtype=torch.float64))
    assert torch.equal(lame.affinity_matrix(x, "rbf", 1), torch.eye(4, dtype=torch.float64))
    assert torch.allclose(lame.affinity_matrix(x, "linear", 5), x @ x.T)
    # duplicated features: self is still excluded from its kNN
    dup = torch.cat([x[:1], x[:1], x[1:]])
    assert (lame.affinity_matrix(dup, "knn", 1).diagonal() == 0).all()


def test_lame_small_batches_and_float32():
    probs, feats = _batch(1)
    p1 = t64(probs)
    assert torch.equal(lame.tta_adjust(p1, t64(feats)), p1)
    # float32, as the suite passes it; rows on the simplex
    probs, feats = _batch(7)
    out = lame.tta_adjust(torch.tensor(probs, dtype=torch.float32),
                          torch.tensor(feats, dtype=torch.float32), affinity="knn")
    assert out.dtype == torch.float32 and torch.allclose(out.sum(1), torch.ones(7), atol=1e-6)
    np.testing.assert_allclose(out.numpy(), lame_np(probs, feats, "knn", 5), atol=1e-5)
    with pytest.raises(ValueError):
        lame.tta_adjust(t64(probs), t64(feats), affinity="cosine")


@pytest.mark.parametrize("affinity", ["rbf", "knn"])
def test_lame_flips_confidently_wrong_samples_to_their_cluster(affinity):
    rng = np.random.default_rng(1)
    k, per = 3, 6
    centres = np.eye(8)[:2] * 5.0
    feats = np.concatenate([c + 0.05 * rng.normal(size=(per, 8)) for c in centres])
    labels = np.repeat([0, 1], per)
    probs = np.full((2 * per, k), 0.05)
    probs[np.arange(2 * per), labels] = 0.9
    wrong = [2, per + 4]
    for i in wrong:  # confidently the other cluster's class
        probs[i] = [0.05, 0.05, 0.05]
        probs[i, 1 - labels[i]] = 0.8
        probs[i, labels[i]] = 0.15
    assert (probs.argmax(1)[wrong] != labels[wrong]).all()
    out = lame.tta_adjust(t64(probs), t64(feats), affinity=affinity).numpy()
    assert (out.argmax(1) == labels).all()
    np.testing.assert_allclose(out, lame_np(probs, feats, affinity, 5), atol=1e-10)
