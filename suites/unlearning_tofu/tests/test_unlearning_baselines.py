"""Known-answer tests of the TOFU unlearning baselines (suites/unlearning_tofu/baselines).

Each hook is compared, in float64, with an independent pure-Python re-implementation
(loops over sequences, positions and vocabulary with math.log/exp) written from
open-unlearning's conventions: Hugging Face labels with -100 rebuilt from the batch's mask,
sequence NLLs summed over answer tokens, token- or sequence-weighted means as the
reference takes them. Plus: gradients where the formula gives them in closed form,
finiteness on extreme logits, and torch.func.vmap over members against a loop.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.func import vmap

from suites.unlearning.batch import lm_batch

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
NAMES = ("target", "grad_ascent", "grad_diff", "grad_diff_kl", "npo", "npo_rt", "simnpo",
         "idk_nll", "idk_dpo", "rmu", "satimp", "wga", "undial")


def load(name: str) -> ModuleType:
    """A baseline loaded by path: the hook ``unlearning_loss`` need not be registered."""
    spec = importlib.util.spec_from_file_location(f"_unlearning_baseline_{name}",
                                                  BASELINES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODS = {name: load(name) for name in NAMES}

# (question length, answer length incl. end token) per row; the rest of the row is padding.
FORGET_ROWS = [(2, 5), (1, 3), (3, 2)]  # T = 7: rows 1 and 2 end in padding
RETAIN_ROWS = [(1, 5), (2, 2), (1, 4), (3, 1)]  # T = 6, another batch size
IDK_ROWS = [(2, 3), (1, 2), (3, 1)]  # T = 5, paired row by row with the forget batch
V, D = 11, 6


def _rows_to_labels(rows, T, generator):
    labels = torch.randint(1, V, (len(rows), T), generator=generator)
    mask = torch.zeros(len(rows), T)
    for b, (q, a) in enumerate(rows):
        mask[b, q:q + a] = 1.0
        labels[b, q + a:] = 0  # padding id past the end
    return labels, mask


def make_inputs(seed: int, *, scale: float = 2.0, dtype=torch.float64, lead=()):
    """Raw tensors of every batch and context value (``lead`` = a leading member shape)."""
    g = torch.Generator().manual_seed(seed)

    def logits(rows, T):
        return torch.randn(*lead, len(rows), T, V, generator=g, dtype=dtype) * scale

    raw = {}
    for key, rows, T in (("forget", FORGET_ROWS, 7), ("retain", RETAIN_ROWS, 6),
                         ("idk", IDK_ROWS, 5)):
        labels, mask = _rows_to_labels(rows, T, g)
        labels = labels.expand(*lead, *labels.shape).clone()
        mask = mask.expand(*lead, *mask.shape).clone()
        raw[key] = (logits(rows, T), labels, mask)
        raw["ref_" + key] = (logits(rows, T), labels, mask)
    for key, rows, T in (("forget", FORGET_ROWS, 7), ("retain", RETAIN_ROWS, 6)):
        raw["hidden_" + key] = torch.randn(*lead, len(rows), T, D, generator=g, dtype=dtype)
        raw["ref_hidden_" + key] = torch.randn(*lead, len(rows), T, D, generator=g,
                                               dtype=dtype)
    u = torch.rand(*lead, D, generator=g, dtype=dtype)
    raw["control_vector"] = u / u.norm(dim=-1, keepdim=True)
    return raw


def batches(raw):
    """LMBatches (from ``lm_batch``) and tensors: what the trainer would pass."""
    return {k: lm_batch(*v) if isinstance(v, tuple) else v for k, v in raw.items()}


def context_names(fn) -> list[str]:
    return [n for n, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY and p.default is p.empty]


def call(name, values, **hp):
    fn = MODS[name].unlearning_loss
    ctx = {k: values[k] for k in context_names(fn)}
    return fn(values["forget"], values["retain"], **ctx, **hp)


# --- the independent pure-Python reference ---

def py_log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(z - m) for z in row))
    return [z - lse for z in row]


def py_logsigmoid(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


class PyBatch:
    """Lists, and the Hugging Face view: ``hf[b][s]`` = label of INPUT position s or -100."""

    def __init__(self, triple):
        logits, labels, mask = triple
        self.logits, self.labels = logits.tolist(), labels.tolist()
        self.mask = [[m > 0.5 for m in row] for row in mask.tolist()]
        self.B, self.T = len(self.labels), len(self.labels[0])
        # Unshifted HF labels over T+1 input positions: input s+1 is the next token of s.
        self.hf = [[-100] + [self.labels[b][t] if self.mask[b][t] else -100
                             for t in range(self.T)] for b in range(self.B)]

    def logp(self, b, t):
        return py_log_softmax(self.logits[b][t])

    def token_logps(self, b):
        """log π(y_s | y_<s) for every input s whose HF label is not -100 (the shift)."""
        return [self.logp(b, s - 1)[self.hf[b][s]]
                for s in range(1, self.T + 1) if self.hf[b][s] != -100]

    def seq_logp(self, b):
        return sum(self.token_logps(b))

    def nll(self):
        tokens = [lp for b in range(self.B) for lp in self.token_logps(b)]
        return -sum(tokens) / len(tokens)


def py_dpo(win, win_ref, lose, lose_ref, beta):
    """compute_dpo_loss: −(2/β)·mean log σ(β(win_ratio − lose_ratio)), ratios per sequence."""
    terms = []
    for b in range(lose.B):
        w = (win.seq_logp(b) - win_ref.seq_logp(b)) if win is not None else 0.0
        ell = lose.seq_logp(b) - lose_ref.seq_logp(b)
        terms.append(py_logsigmoid(beta * (w - ell)))
    return -2.0 / beta * sum(terms) / len(terms)


def py_reweighted_ga(f, weight):
    """−mean over counted tokens of w(p)·(−log p) (compute_wga_loss / compute_satimp_loss)."""
    terms = [weight(math.exp(lp)) * lp for b in range(f.B) for lp in f.token_logps(b)]
    return sum(terms) / len(terms)


def py_activation_loss(h, target, batch):
    """RMU's compute_activation_loss with ``labels != -100`` on the UNSHIFTED labels."""
    h, target = h.tolist(), target.tolist()
    per_seq = []
    for b in range(batch.B):
        counted = [s for s in range(batch.T) if batch.hf[b][s] != -100]
        errs = [sum((h[b][s][d] - target[b][s][d]) ** 2 for d in range(D)) / D
                for s in counted]
        per_seq.append(sum(errs) / len(errs) if errs else 0.0)
    return sum(per_seq) / len(per_seq)


def reference(name, raw, **hp):
    f, r = PyBatch(raw["forget"]), PyBatch(raw["retain"])
    gamma, alpha = hp.get("gamma"), hp.get("alpha")
    if name == "target":
        return 0.0
    if name == "grad_ascent":
        return -f.nll()
    if name == "grad_diff":
        return -gamma * f.nll() + alpha * r.nll()
    if name == "grad_diff_kl":
        ref = PyBatch(raw["ref_retain"])
        kl = 0.0
        for b in range(r.B):
            for t in range(r.T):  # every position: question, answer and padding
                lq, lp = ref.logp(b, t), r.logp(b, t)
                kl += sum(math.exp(a) * (a - c) for a, c in zip(lq, lp, strict=True))
        return -gamma * f.nll() + alpha * kl / (r.B * r.T)
    if name in ("npo", "npo_rt"):
        lf = py_dpo(None, None, f, PyBatch(raw["ref_forget"]), hp["beta"])
        return gamma * lf + alpha * r.nll()
    if name == "simnpo":
        terms = []
        for b in range(f.B):
            n = sum(1 for s in f.hf[b] if s != -100)
            terms.append(py_logsigmoid(hp["beta"] * (-f.seq_logp(b) / n - hp["delta"])))
        return gamma * (-2.0 / hp["beta"] * sum(terms) / len(terms)) + alpha * r.nll()
    if name == "idk_nll":
        idk = PyBatch(raw["idk"])
        tokens = [lp for x in (idk, r) for b in range(x.B) for lp in x.token_logps(b)]
        return -sum(tokens) / len(tokens)
    if name == "idk_dpo":
        lf = py_dpo(PyBatch(raw["idk"]), PyBatch(raw["ref_idk"]), f,
                    PyBatch(raw["ref_forget"]), hp["beta"])
        return gamma * lf + alpha * r.nll()
    if name == "rmu":
        steer = (hp["steering_coeff"] * raw["control_vector"]).expand_as(raw["hidden_forget"])
        return (gamma * py_activation_loss(raw["hidden_forget"], steer, f)
                + alpha * py_activation_loss(raw["hidden_retain"], raw["ref_hidden_retain"], r))
    if name == "satimp":
        lf = py_reweighted_ga(f, lambda p: p ** hp["beta1"] * (1 - p) ** hp["beta2"])
        return gamma * lf + alpha * r.nll()
    if name == "wga":
        return gamma * py_reweighted_ga(f, lambda p: p ** hp["beta"]) + alpha * r.nll()
    if name == "undial":
        ref = PyBatch(raw["ref_forget"])
        total = 0.0
        for b in range(f.B):
            for t in range(f.T):
                z = list(ref.logits[b][t])
                label = f.hf[b][t + 1]  # the shifted HF label of this position
                if label != -100:
                    z[label] -= hp["beta"]
                q = [math.exp(v) for v in py_log_softmax(z)]
                total -= sum(qi * li for qi, li in zip(q, f.logp(b, t), strict=True))
        return gamma * total / (f.B * f.T) + alpha * r.nll()
    raise KeyError(name)


DEFAULTS = {
    "target": {},
    "grad_ascent": {},
    "grad_diff": {"gamma": 1.0, "alpha": 1.0},
    "grad_diff_kl": {"gamma": 1.0, "alpha": 1.0},
    "npo": {"beta": 0.1, "gamma": 1.0, "alpha": 0.0},
    "npo_rt": {"beta": 0.1, "gamma": 1.0, "alpha": 1.0},
    "simnpo": {"beta": 4.5, "delta": 0.0, "gamma": 0.125, "alpha": 1.0},
    "idk_nll": {},
    "idk_dpo": {"beta": 0.1, "gamma": 1.0, "alpha": 1.0},
    "rmu": {"steering_coeff": 2.0, "gamma": 1.0, "alpha": 1.0},
    "satimp": {"beta1": 5.0, "beta2": 1.0, "gamma": 0.1, "alpha": 1.0},
    "wga": {"beta": 1.0, "gamma": 1.0, "alpha": 1.0},
    "undial": {"beta": 10.0, "gamma": 1.0, "alpha": 0.0},
}
CONTEXT = {
    "target": [], "grad_ascent": [], "grad_diff": [], "grad_diff_kl": ["ref_retain"],
    "npo": ["ref_forget"], "npo_rt": ["ref_forget"], "simnpo": [], "idk_nll": ["idk"],
    "idk_dpo": ["idk", "ref_idk", "ref_forget"],
    "rmu": ["hidden_forget", "hidden_retain", "ref_hidden_retain", "control_vector"],
    "satimp": [], "wga": [], "undial": ["ref_forget"],
}
# Non-default values, so that a hyperparameter the hook ignores is caught.
OTHER = {
    "grad_diff": {"gamma": 0.7, "alpha": 2.5},
    "grad_diff_kl": {"gamma": 0.7, "alpha": 2.5},
    "npo": {"beta": 0.9, "gamma": 0.6, "alpha": 1.7},
    "npo_rt": {"beta": 0.9, "gamma": 0.6, "alpha": 1.7},
    "simnpo": {"beta": 1.3, "delta": 0.4, "gamma": 0.9, "alpha": 0.3},
    "idk_dpo": {"beta": 0.8, "gamma": 1.4, "alpha": 0.2},
    "rmu": {"steering_coeff": 5.0, "gamma": 0.4, "alpha": 3.0},
    "satimp": {"beta1": 1.5, "beta2": 2.5, "gamma": 0.8, "alpha": 0.6},
    "wga": {"beta": 2.5, "gamma": 0.8, "alpha": 0.6},
    "undial": {"beta": 3.0, "gamma": 0.8, "alpha": 0.6},
}


def test_signatures_defaults_and_model():
    for name in NAMES:
        sig = inspect.signature(MODS[name].unlearning_loss)
        params = list(sig.parameters.values())
        assert [p.name for p in params[:2]] == ["forget", "retain"], name
        assert all(p.kind is p.KEYWORD_ONLY for p in params[2:]), name
        hp = {p.name: p.default for p in params[2:] if p.default is not p.empty}
        assert hp == DEFAULTS[name], name
        assert context_names(MODS[name].unlearning_loss) == CONTEXT[name], name
    assert MODS["rmu"].MODEL == {"hidden_layer": 1}
    assert all(not hasattr(MODS[n], "MODEL") for n in NAMES if n != "rmu")


@pytest.mark.parametrize(("name", "which"), [(n, "defaults") for n in NAMES]
                         + [(n, "other") for n in OTHER])
def test_known_answer(name, which):
    hp = DEFAULTS[name] if which == "defaults" else OTHER[name]
    for seed in (0, 1):
        raw = make_inputs(seed)
        got = call(name, batches(raw), **({} if which == "defaults" else hp))
        assert got.dtype == torch.float64 and got.dim() == 0
        assert got.item() == pytest.approx(reference(name, raw, **hp), rel=1e-10, abs=1e-12)


def test_npo_is_npo_rt_without_retain_and_idk_nll_is_token_weighted():
    values = batches(make_inputs(3))
    retain_nll = -values["retain"].token_logprobs.sum() / values["retain"].mask.sum()
    npo, npo_rt = call("npo", values), call("npo_rt", values)
    torch.testing.assert_close(npo + retain_nll, npo_rt, rtol=1e-12, atol=1e-12)
    # Token-weighted over idk ∪ retain, not the mean of the two means (counts differ: 6 vs 12).
    idk_nll = -values["idk"].token_logprobs.sum() / values["idk"].mask.sum()
    assert call("idk_nll", values).item() != pytest.approx(0.5 * (idk_nll + retain_nll).item())


# What the forget term differentiates: the forget logits, except for these two.
FORGET_KEY = {"idk_nll": "idk", "rmu": "hidden_forget"}


def grad_of(name, raw, key=None, **hp):
    """The hook's value and its gradient w.r.t. the logits (or tensor) under ``key``."""
    key = key or FORGET_KEY.get(name, "forget")
    raw = dict(raw)
    if isinstance(raw[key], tuple):
        leaf = raw[key][0].clone().requires_grad_(True)
        raw[key] = (leaf, *raw[key][1:])
    else:
        leaf = raw[key] = raw[key].clone().requires_grad_(True)
    loss = call(name, batches(raw), **hp)
    (g,) = torch.autograd.grad(loss, leaf, allow_unused=True)
    return loss.detach(), (torch.zeros_like(leaf) if g is None else g)


def test_target_is_zero_with_exactly_zero_gradient():
    raw = make_inputs(4)
    loss, g = grad_of("target", raw)
    assert loss.item() == 0.0
    assert torch.count_nonzero(g) == 0
    assert g.shape == raw["forget"][0].shape


def test_grad_ascent_gradient_is_minus_the_nll_gradient():
    raw = make_inputs(5)
    logits, labels, mask = raw["forget"]
    loss, g = grad_of("grad_ascent", raw)
    z = logits.clone().requires_grad_(True)
    hf = torch.where(mask > 0, labels, torch.full_like(labels, -100))
    ce = torch.nn.functional.cross_entropy(z.reshape(-1, V), hf.reshape(-1), ignore_index=-100)
    (g_ce,) = torch.autograd.grad(ce, z)
    torch.testing.assert_close(loss, -ce.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(g, -g_ce, rtol=1e-12, atol=1e-15)


def _score(raw_key):
    """d log π(label)/dz = onehot(label) − softmax(z) at counted positions, 0 elsewhere."""
    logits, labels, mask = raw_key
    onehot = torch.nn.functional.one_hot(labels, V).to(logits.dtype)
    return (onehot - logits.softmax(-1)) * mask[..., None]


def test_npo_gradient_closed_form():
    # d/ds [−(2/β) log σ(−β(s − s_ref))] = 2 σ(β(s − s_ref)), then ds/dz = Σ_t score_t.
    raw = make_inputs(6)
    beta = 0.9
    _, g = grad_of("npo", raw, beta=beta)
    s = lm_batch(*raw["forget"]).seq_logprobs
    s_ref = lm_batch(*raw["ref_forget"]).seq_logprobs
    weight = 2 * torch.sigmoid(beta * (s - s_ref)) / len(FORGET_ROWS)
    torch.testing.assert_close(g, weight[:, None, None] * _score(raw["forget"]))


@pytest.mark.parametrize("name", ["wga", "satimp"])
def test_reweighted_gradient_ascent_weights_are_detached(name):
    # L_f = Σ w·log p / N with w constant: the gradient is γ·w·score/N, no dw/dz term.
    raw = make_inputs(7)
    _, g = grad_of(name, raw)
    logits, labels, mask = raw["forget"]
    p = lm_batch(logits, labels, mask).token_logprobs.exp()
    w = p if name == "wga" else p ** 5 * (1 - p)
    gamma = DEFAULTS[name]["gamma"]
    expected = gamma * (w * mask)[..., None] * _score(raw["forget"]) / mask.sum()
    torch.testing.assert_close(g, expected)


def test_undial_gradient_and_positions():
    raw = make_inputs(8)
    _, g = grad_of("undial", raw)
    logits, labels, mask = raw["forget"]
    ref = raw["ref_forget"][0]
    onehot = torch.nn.functional.one_hot(labels, V).to(ref.dtype)
    target = (ref - 10.0 * onehot * mask[..., None]).softmax(-1)
    torch.testing.assert_close(g, (logits.softmax(-1) - target) / labels.numel())
    # A question or padding label is never pushed down; their positions still count.
    values = batches(raw)
    relabelled = dict(raw)
    relabelled["forget"] = (logits, torch.where(mask > 0, labels, (labels + 3) % V), mask)
    torch.testing.assert_close(call("undial", batches(relabelled)), call("undial", values))
    moved = dict(raw)
    moved["forget"] = (logits.clone(), labels, mask)
    moved["forget"][0][1, 6, 0] += 1.0  # one logit at row 1's padding position
    assert call("undial", batches(moved)).item() != pytest.approx(call("undial", values).item())


def test_grad_diff_kl_counts_every_retain_position():
    raw = make_inputs(9)
    same = dict(raw)
    same["ref_retain"] = raw["retain"]
    f_nll = -lm_batch(*raw["forget"]).token_logprobs.sum() / raw["forget"][2].sum()
    torch.testing.assert_close(call("grad_diff_kl", batches(same)), -f_nll, rtol=1e-12,
                               atol=1e-12)
    moved = dict(raw)
    moved["retain"] = (raw["retain"][0].clone(), *raw["retain"][1:])
    moved["retain"][0][3, 5, 0] += 1.0  # row 3 is padding from position 4 on
    assert call("grad_diff_kl", batches(moved)).item() != pytest.approx(
        call("grad_diff_kl", batches(raw)).item())


def test_rmu_counts_the_positions_whose_input_is_an_answer_token():
    raw = make_inputs(10)
    _, g = grad_of("rmu", raw, key="hidden_forget")
    counted = (g.abs().sum(-1) > 0).to(torch.float64)
    mask = raw["forget"][2].to(torch.float64)
    shifted = torch.cat([torch.zeros_like(mask[:, :1]), mask[:, :-1]], dim=1)
    torch.testing.assert_close(counted, shifted, rtol=0, atol=0)
    # Closed form: d/dh of γ·mean_b mean_{counted t} ‖h − c u‖²/D = 2(h − c u)/(D·n_b·B).
    steer = 2.0 * raw["control_vector"]
    n = shifted.sum(-1).clamp(min=1)
    expected = 2 * (raw["hidden_forget"] - steer) * shifted[..., None] / (D * n[:, None, None]
                                                                          * len(FORGET_ROWS))
    torch.testing.assert_close(g, expected)


def test_empty_answer_rows_stay_finite():
    raw = make_inputs(11)
    for key in ("forget", "ref_forget"):
        logits, labels, mask = raw[key]
        mask = mask.clone()
        mask[2] = 0.0  # a row with no counted token at all
        raw[key] = (logits, labels, mask)
    for name in NAMES:
        loss, g = grad_of(name, raw)
        assert torch.isfinite(loss) and torch.isfinite(g).all(), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_finite_on_extreme_logits(name, dtype):
    raw = make_inputs(12, dtype=dtype)
    g = torch.Generator().manual_seed(13)
    for key, value in list(raw.items()):
        if isinstance(value, tuple):  # logits of ±50
            sign = torch.randint(0, 2, value[0].shape, generator=g).to(dtype) * 2 - 1
            raw[key] = (50.0 * sign, *value[1:])
    for key in ("hidden_forget", "hidden_retain", "ref_hidden_retain"):
        raw[key] = raw[key] * 50.0
    hp = OTHER.get(name, {})
    for kwargs in ({}, hp):
        loss, grad = grad_of(name, raw, **kwargs)
        assert torch.isfinite(loss) and torch.isfinite(grad).all(), (name, kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_members_matches_a_loop(name):
    members = 3
    raw = make_inputs(14, lead=(members,))
    trained = ("forget", "retain", "idk", "hidden_forget", "hidden_retain")
    leaves = {}
    for key in trained:
        value = raw[key]
        leaf = (value[0] if isinstance(value, tuple) else value).clone().requires_grad_(True)
        leaves[key] = leaf
        raw[key] = (leaf, *value[1:]) if isinstance(value, tuple) else leaf
    values = batches(raw)
    fn = MODS[name].unlearning_loss
    wanted = context_names(fn)

    def member(forget, retain, ctx):
        return fn(forget, retain, **ctx)

    ctx = {k: values[k] for k in wanted}
    batched = vmap(member)(values["forget"], values["retain"], ctx)
    assert batched.shape == (members,)
    grads = torch.autograd.grad(batched.sum(), list(leaves.values()), allow_unused=True,
                                retain_graph=True)  # the loop below reuses the LMBatches

    def pick(value, m):
        return type(value)(*(x[m] for x in value)) if isinstance(value, tuple) else value[m]

    looped = torch.stack([member(pick(values["forget"], m), pick(values["retain"], m),
                                 {k: pick(v, m) for k, v in ctx.items()})
                          for m in range(members)])
    loop_grads = torch.autograd.grad(looped.sum(), list(leaves.values()), allow_unused=True)
    torch.testing.assert_close(batched, looped, rtol=1e-12, atol=1e-12)
    for key, a, b in zip(leaves, grads, loop_grads, strict=True):
        assert (a is None) == (b is None), (name, key)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=f"{name} {key}")
    # Each member's value is the known answer of its own inputs.
    for m in range(members):
        own = {k: (tuple(x[m].detach() for x in v) if isinstance(v, tuple) else v[m].detach())
               for k, v in raw.items()}
        assert looped[m].item() == pytest.approx(reference(name, own, **DEFAULTS[name]),
                                                 rel=1e-10, abs=1e-12)
