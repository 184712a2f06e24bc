"""The certified suite: schedules, the lift, the baselines, the soundness check, end to end."""

from __future__ import annotations

import dataclasses
import importlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.contract.registry import get_suite
from harness.objectives.loading import load_objective
from harness.report import stats
from harness.runner.inprocess import run_cells
from harness.train import Optimizer, Shuffled, TrainConfig, stacked_init, train_members
from suites.certified import SUITE, attack, bounds
from suites.certified.data import CIFAR_MEAN, CIFAR_STD, Box, load_dataset
from suites.certified.evaluation import Evaluation, SoundnessError, check_soundness, judge_member
from suites.certified.models import certified_cnn, certified_mlp, recalibrate
from suites.certified.schedule import Schedule
from suites.certified.training import member_loss, model_for, schedule_of, training_for

BASELINES = ("ce", "ibp", "ibp_k0", "crown_ibp", "fast_ibp", "pgd_at")
METRICS = {"verified_acc", "clean_acc", "pgd_acc", "ibp_verified_acc", "crown_verified_acc",
           "ibp_gap", "crown_gap"}


def light(suite, grid=(1.0,), chunk=2):
    """``suite`` training ``chunk`` seeds per member chunk (not 5), judged with a light PGD
    (10 steps, 2 restarts; not 100 × 5) and ``grid`` × ε_test as the ε curve: the same
    pipeline, for checks that concern neither the attack's strength, the ε curve nor the
    chunking. The judge's CROWN on the 797 test digits per member dominates these runs."""
    settings = suite.settings
    return dataclasses.replace(suite, chunk=chunk, settings={
        **settings, "pgd": {**settings["pgd"], "steps": 10, "restarts": 2},
        "eps_grid": list(grid)})


def hook(name):
    return importlib.import_module(f"suites.certified.baselines.{name}").certified_loss


def ce(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")


# --- schedules ------------------------------------------------------------------------

def test_eps_ramp_and_kappa_follow_the_protocol():
    s = schedule_of(SUITE, SUITE.variant("eps-0.1"))
    assert s == Schedule(eps_max=pytest.approx(0.11), warmup=0.05, ramp=0.45)
    assert s.eps(0.0) == s.eps(0.05) == 0.0  # 5 of 100 epochs natural
    assert s.eps(0.275) == pytest.approx(0.055)  # linear: half way up the ramp
    assert s.eps(0.5) == s.eps(0.9) == s.eps(1.0) == pytest.approx(0.11)
    assert s.kappa(0.0) == s.kappa(0.05) == 1.0
    assert s.kappa(0.275) == pytest.approx(0.75)
    assert s.kappa(0.7) == pytest.approx(0.5)
    assert s.kappa(0.7, final=0.0) == pytest.approx(0.0)


# --- the lift and the natural reference -----------------------------------------------

def _linear_member(seed=0):
    """A 4-input, 3-class linear net (IBP is exact there) and a batch inside [0, 1]."""
    gen = torch.Generator().manual_seed(seed)
    net = certified_mlp((4, 3))
    params = {"0.weight": torch.randn(3, 4, generator=gen), "0.bias": torch.randn(3, generator=gen)}
    x = 0.3 + 0.4 * torch.rand(5, 4, generator=gen)
    y = torch.tensor([0, 1, 2, 1, 0])
    return net, params, x, y


def _call(objective_name, progress, *, net=None, params=None, x=None, y=None):
    objective = load_objective(objective_name)
    training = training_for(objective, SUITE)
    schedule = Schedule(eps_max=0.2)
    loss = member_loss(net, objective, training, schedule, Box())
    return training, loss(params, {"x": x, "y": y, "index": torch.arange(5)}, torch.zeros(5),
                          progress)


def test_lift_mixes_the_classification_loss_on_logits_and_worst_case_logits():
    net, params, x, y = _linear_member()
    w, b = params["0.weight"], params["0.bias"]
    progress, eps, kappa = 0.275, 0.1, 0.75  # half way up the ramp to ε_max = 0.2
    z = x @ w.T + b
    # Known answer for a linear net: m̲_j = (w_y − w_j)·x + b_y − b_j − ε‖w_y − w_j‖₁.
    diff = w[y][:, None, :] - w[None]
    margins = (diff * x[:, None, :]).sum(-1) + b[y][:, None] - b[None] - eps * diff.abs().sum(-1)
    gce = importlib.import_module("harness.objectives.builtin.gce").classification_loss
    expected = kappa * gce(z, y) + (1 - kappa) * gce(-margins, y)
    training, got = _call("gce", progress, net=net, params=params, x=x, y=y)
    assert training.kind == "lifted" and training.hook == "classification_loss"
    torch.testing.assert_close(got, expected)
    # In the warm-up the lift is the classification loss itself.
    torch.testing.assert_close(_call("gce", 0.01, net=net, params=params, x=x, y=y)[1],
                               gce(z, y))


def test_builtin_ibp_is_the_lift_of_ce_and_the_reference_ce_trains_naturally():
    net, params, x, y = _linear_member(1)
    z = x @ params["0.weight"].T + params["0.bias"]
    for progress in (0.01, 0.2, 0.5, 0.9):
        training, natural = _call("ce", progress, net=net, params=params, x=x, y=y)
        assert training.kind == "natural"
        torch.testing.assert_close(natural, ce(z, y))
        ibp = _call("ibp", progress, net=net, params=params, x=x, y=y)[1]
        s, eps = Schedule(0.2), Schedule(0.2).eps(progress)
        worst = bounds.worst_case_logits(bounds.ibp_margins(net.plain, params, x, eps, y))
        expected = s.kappa(progress) * ce(z, y) + (1 - s.kappa(progress)) * ce(worst, y)
        torch.testing.assert_close(ibp, expected)


def test_ce_from_a_file_is_lifted_not_natural(tmp_path):
    path = tmp_path / "ce.py"
    path.write_text("import torch.nn.functional as F\n"
                    "def classification_loss(logits, targets):\n"
                    "    return F.cross_entropy(logits, targets, reduction='none')\n")
    assert training_for(load_objective(str(path)), SUITE).kind == "lifted"


def test_a_bad_model_declaration_fails_its_cells_clearly(tmp_path):
    path = tmp_path / "other.py"
    path.write_text("def certified_loss(logits, worst_logits, targets):\n"
                    "    return logits.sum()\n"
                    "MODEL = {'batch_norm': 'yes'}\n")
    cells = run_cells(SUITE.shortened(1), load_objective(str(path)), ["eps-0.1"], [0])
    assert cells[0].status == "failed" and "MODEL['batch_norm']" in cells[0].error


def test_a_diverging_objective_is_a_result_not_a_crash(tmp_path):
    path = tmp_path / "unstable.py"
    path.write_text("def certified_loss(logits, worst_logits, targets, *, progress):\n"
                    "    return worst_logits.logsumexp(-1) * (1.0 if progress < 0.5 else "
                    "float('nan'))\n")
    cells = run_cells(SUITE.shortened(2), load_objective(str(path)), ["eps-0.05"], [0, 1])
    assert [c.status for c in cells] == ["diverged", "diverged"]
    assert cells[0].diverged_step == 16 and cells[0].metrics == {}
    assert len(cells[0].curves["train_loss"]) == 2


# --- baselines: known answers -------------------------------------------------------------

LOGITS = torch.tensor([[2.0, 0.0, -1.0], [0.5, 1.0, 0.0]])
WORST = torch.tensor([[0.0, 1.0, -0.5], [0.3, 0.0, 0.7]])
CROWN = torch.tensor([[0.0, 0.5, -1.0], [-0.2, 0.0, 0.1]])
TARGETS = torch.tensor([0, 1])


def _ce_row(z, y):
    return math.log(sum(math.exp(v) for v in z)) - z[y]


def test_ibp_and_ibp_k0_known_answers():
    ce_nat = [_ce_row(LOGITS[i].tolist(), i) for i in range(2)]
    ce_rob = [_ce_row(WORST[i].tolist(), i) for i in range(2)]
    ibp, k0 = hook("ibp"), hook("ibp_k0")
    assert ibp(LOGITS, WORST, TARGETS, eps=0.0, eps_max=0.1).tolist() == pytest.approx(ce_nat)
    full = [0.5 * a + 0.5 * b for a, b in zip(ce_nat, ce_rob, strict=True)]
    assert ibp(LOGITS, WORST, TARGETS, eps=0.1, eps_max=0.1).tolist() == pytest.approx(full)
    assert k0(LOGITS, WORST, TARGETS, eps=0.1, eps_max=0.1).tolist() == pytest.approx(ce_rob)
    half = [0.5 * a + 0.5 * b for a, b in zip(ce_nat, ce_rob, strict=True)]  # κ = 0.5 at ε/2
    assert k0(LOGITS, WORST, TARGETS, eps=0.05, eps_max=0.1).tolist() == pytest.approx(half)


def test_crown_ibp_blends_bounds_with_beta_and_losses_with_kappa():
    fn = hook("crown_ibp")
    # ε_t = ε_max/2: β = 0.5 (bounds half CROWN-IBP), κ = 0.75.
    blend = 0.5 * CROWN + 0.5 * WORST
    expected = [0.75 * _ce_row(LOGITS[i].tolist(), i) + 0.25 * _ce_row(blend[i].tolist(), i)
                for i in range(2)]
    got = fn(LOGITS, WORST, TARGETS, eps=0.05, eps_max=0.1, crown_ibp_worst_logits=lambda: CROWN)
    assert got.tolist() == pytest.approx(expected)
    # At ε_max: β = 0 (IBP bounds only, CROWN-IBP not even computed), κ = 0.5.
    end = fn(LOGITS, WORST, TARGETS, eps=0.1, eps_max=0.1, crown_ibp_worst_logits=None)
    torch.testing.assert_close(end, hook("ibp")(LOGITS, WORST, TARGETS, eps=0.1, eps_max=0.1))


def test_fast_ibp_natural_warmup_then_robust_loss_plus_regularisers():
    fn = hook("fast_ibp")
    # Input box radius 0.1; one hidden layer: centres (2, −0.5, 0), radii (1, 0.25, 1.75):
    # active, inactive, unstable; mean radius 1.
    box = (torch.zeros(1, 4), torch.full((1, 4), 0.2))
    centre, radius = torch.tensor([[2.0, -0.5, 0.0]]), torch.tensor([[1.0, 0.25, 1.75]])
    layers = [box, (centre - radius, centre + radius), (LOGITS[:1], LOGITS[:1])]
    args = (LOGITS[:1], WORST[:1], TARGETS[:1])
    assert fn(*args, eps=0.0, eps_max=0.1, bounds=layers).tolist() == pytest.approx(
        [_ce_row(LOGITS[0].tolist(), 0)])
    robust = _ce_row(WORST[0].tolist(), 0)
    assert float(fn(*args, eps=0.1, eps_max=0.1, bounds=layers)) == pytest.approx(robust)
    tightness = (0.5 - 0.1 / 1.0) / 0.5  # ReLU(τ − r₀/r)/τ
    mean_term = (0.5 - 0.25) / 0.5  # mean ratio (2/3)/(0.5/3) = 4 → ρ = 0.25
    var_term = (0.5 - 1 / 2.25) / 0.5  # Σ(c − c̄)²: 2.25 active vs 1 inactive → ρ = 1/2.25
    lam = 0.5 * (1 - 0.5)  # λ·(1 − ε/ε_max) at ε_max/2
    got = float(fn(*args, eps=0.05, eps_max=0.1, bounds=layers))
    assert got == pytest.approx(robust + lam * (tightness + mean_term + var_term), rel=1e-5)


def test_pgd_at_is_ce_on_adversarial_logits():
    got = hook("pgd_at")(LOGITS, WORST, TARGETS, adv_logits=CROWN)
    torch.testing.assert_close(got, ce(CROWN, TARGETS))


# --- models: BatchNorm folding and recalibration --------------------------------------------

def test_batchnorm_folds_exactly_and_recalibrates_on_the_data():
    net = certified_mlp((6, 8, 8, 3), batch_norm=True, init="ibp")
    torch.manual_seed(0)
    for m in net.train.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    params = {k: v.detach() for k, v in net.train.named_parameters()}
    params = {k: v + 0.1 * torch.randn_like(v) for k, v in params.items()}
    x = torch.rand(50, 6)
    logits, stats = net.forward(params, x)
    plain = net.fold(params, stats)
    torch.testing.assert_close(torch.func.functional_call(net.plain, plain, (x,)), logits,
                               rtol=1e-4, atol=1e-5)
    # Training-mode BatchNorm on the whole set = the recalibrated statistics.
    full = recalibrate(net, params, x, chunk=7)
    for name, (mean, var) in stats.items():
        torch.testing.assert_close(full[name][0], mean, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(full[name][1], var, rtol=1e-4, atol=1e-5)
    # IBP init: hidden weights ~ N(0, (√(2π)/fan_in)²), the head keeps PyTorch's init.
    std = float(net.train[0].weight.detach().std())
    assert std == pytest.approx(math.sqrt(2 * math.pi) / 6, rel=0.4)


@pytest.mark.parametrize("name", ["pgd_at", "fast_ibp"])
def test_member_loss_gives_the_same_numbers_batched_and_looped(name):
    objective = load_objective(name)
    training = training_for(objective, SUITE)
    data = load_dataset("digits", None, False)
    net = model_for(data, training)
    loss = member_loss(net, objective, training, Schedule(0.11, warmup=0.1, ramp=0.3), Box(),
                         train_pgd_steps=3)
    x, y = torch.from_numpy(data.x_train[:128]), torch.from_numpy(data.y_train[:128])
    config = TrainConfig(epochs=2, batch_size=32, optimizer=Optimizer(lr=0.05))
    runs = [train_members(loss, stacked_init(net.train, [0, 1]),
                          Shuffled([0, 1], 32, 2, shared={"x": x}, own={"y": y.expand(2, -1)}),
                          config, mode=mode) for mode in ("vmap", "loop")]
    assert [r.mode for r in runs] == ["vmap", "loop"]
    for k, v in runs[0].params.items():
        torch.testing.assert_close(v, runs[1].params[k], rtol=1e-4, atol=1e-5)


# --- the soundness check --------------------------------------------------------------------

def _evaluation(**changes):
    """One member, 3 samples, 3 classes: sample 0 verified, 1 PGD-broken, 2 misclassified."""
    clean = torch.tensor([[[0.0, 2.0, 3.0], [0.0, 1.0, 0.5], [0.0, -1.0, 1.0]]])
    fields = dict(
        clean_correct=torch.tensor([[True, True, False]]),
        clean_margins=clean,
        ibp_margins=clean - 1.0 * (clean != 0),
        crown_margins=clean - 0.8 * (clean != 0),
        broken=torch.tensor([[False, True, True]]),
        min_margins=torch.tensor([[[0.0, 1.5, 2.5], [0.0, 0.3, -0.2], [0.0, -1.5, 0.5]]]))
    fields.update(changes)
    return Evaluation(**fields)


def test_soundness_check_passes_a_consistent_evaluation():
    check_soundness(_evaluation(), 0)
    metrics, _ = judge_member(_evaluation(), 0)
    assert metrics["verified_acc"] == pytest.approx(1 / 3)
    assert metrics["pgd_acc"] == pytest.approx(1 / 3)
    assert metrics["clean_acc"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("change, message", [
    ({"broken": torch.tensor([[True, True, True]])}, "verified but broken by PGD"),
    ({"broken": torch.tensor([[False, True, False]])}, "PGD-correct but misclassified clean"),
    ({"crown_margins": torch.tensor([[[0.0, 1.7, 0.1], [0.0, 0.05, 0.1], [0.0, -9.0, -9.0]]])},
     "CROWN margin lower bound above an attained margin"),
])
def test_soundness_check_catches_a_violation(change, message):
    with pytest.raises(SoundnessError, match=message):
        check_soundness(_evaluation(**change), 0)


def test_pgd_early_stop_breaks_the_same_samples_with_fewer_steps():
    """Stopping the attack on a sample every member has broken changes no verdict: the
    same samples broken, the same margins where none was; fewer forwards (the vmapped
    forward counted)."""
    gen = torch.Generator().manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    params = {k: torch.randn(2, *v.shape, generator=gen) * 0.6
              for k, v in model.named_parameters()}
    x = torch.rand(40, 8, generator=gen)
    y = torch.randint(0, 3, (40,), generator=gen)
    lo, hi = (x - 0.15).clamp(0, 1), (x + 0.15).clamp(0, 1)
    rows = []  # the samples each forward sees
    real = model.forward

    def counted(t):
        rows.append(t.shape[0])
        return real(t)

    model.forward = counted
    runs = {}
    for early in (False, True):
        rows.clear()
        gens = [torch.Generator().manual_seed(s) for s in (0, 1)]
        runs[early] = (attack.pgd_evaluate(model, params, x, y, lo, hi, 0.15, gens,
                                           attack.PGDConfig(steps=12, restarts=3),
                                           early_stop=early), sum(rows))
    (full, full_rows), (fast, fast_rows) = runs[False], runs[True]
    assert 0 < int(full.broken.all(0).sum()) < len(x)  # some broken by both members, not all
    assert torch.equal(full.broken, fast.broken)
    assert torch.equal(full.min_margins[~full.broken], fast.min_margins[~full.broken])
    assert fast_rows < full_rows


def test_a_soundness_violation_fails_the_cell_as_a_harness_bug(monkeypatch):
    real = bounds.crown_margins

    def inflated(*args, **kwargs):  # claims margins 5 larger than they can be
        margins = real(*args, **kwargs)
        return margins + 5.0 * (margins != 0)

    monkeypatch.setattr(bounds, "crown_margins", inflated)
    cells = run_cells(light(SUITE.shortened(2)), load_objective("ce"), ["eps-0.05"], [0, 1])
    assert [c.status for c in cells] == ["failed", "failed"]
    assert cells[0].error.startswith("harness bug: soundness violated: ")
    assert "CROWN margin lower bound above an attained margin" in cells[0].error
    assert cells[0].metrics == {}


# --- end to end ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def short_run():
    suite = light(SUITE.shortened(4))
    curves = light(SUITE.shortened(4), SUITE.settings["eps_grid"])  # the plot curves' cell
    return {name: run_cells(curves if name == "ibp" else suite, load_objective(name),
                            ["eps-0.1"], [0, 1])
            for name in (*BASELINES, "gce")}


def test_every_baseline_and_a_lifted_loss_run_seed_batched_to_ok_cells(short_run):
    kinds = {name: cells[0].info["training"] for name, cells in short_run.items()}
    assert kinds == {"ce": "natural", "gce": "lifted", **{n: "certified" for n in BASELINES[1:]}}
    assert short_run["fast_ibp"][0].info["batch_norm"] and \
        short_run["fast_ibp"][0].info["init"] == "ibp"
    for name, cells in short_run.items():
        assert [(c.variant, c.seed, c.status) for c in cells] == [
            ("eps-0.1", 0, "ok"), ("eps-0.1", 1, "ok")], (name, cells[0].error)
        for c in cells:
            assert c.info["mode"] == "vmap", (name, c.info["fallback_reason"])
            assert set(c.metrics) == METRICS
            m = c.metrics
            assert 0 <= m["verified_acc"] <= m["pgd_acc"] <= m["clean_acc"] <= 1
            assert m["verified_acc"] >= max(m["ibp_verified_acc"], m["crown_verified_acc"])
            assert m["ibp_gap"] >= 0 and m["crown_gap"] >= 0


def test_cells_carry_the_plot_curves(short_run):
    c = short_run["ibp"][0]
    assert c.curves["eps_grid"] == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    curve, ibp = c.curves["verified_vs_eps"], c.curves["ibp_verified_vs_eps"]
    assert len(curve) == len(ibp) == 5
    assert ibp == sorted(ibp, reverse=True)  # interval bounds are monotone in the box
    assert all(v >= i for v, i in zip(curve, ibp, strict=True))
    assert curve[0] == pytest.approx(c.metrics["clean_acc"], abs=1e-9)  # ε = 0: exact margins
    assert curve[2] == pytest.approx(c.metrics["verified_acc"])
    assert len(c.curves["train_loss"]) == len(c.curves["clean_acc"]) == 4
    assert c.curves["eps_schedule"][-1] == pytest.approx(0.11)


def test_the_default_run_is_the_suites_own_baselines():
    from harness.contract import registry
    assert SUITE.baselines == BASELINES  # the reference first
    noisy = get_suite("noisy-labels").baselines
    assert len(noisy) == 15 and not set(noisy) & set(BASELINES[1:])
    assert all(registry.builtins()[n].suite == "certified" for n in BASELINES[1:])
    assert SUITE.supports({"classification_loss"}) and SUITE.supports({"certified_loss"})


def test_cli_refuses_an_objective_the_suite_cannot_run(capsys):
    from harness.cli import main

    assert main(["run", "suite", "noisy-labels", "--objective", "ibp", "--seeds", "1"]) == 2
    assert ("ibp defines certified_loss, but the noisy-labels suite runs only objectives "
            "defining classification_loss") in capsys.readouterr().err


def test_real_data_variants_run_on_fixture_files(tmp_path):
    """MNIST and CIFAR-10 (normalised: radius ε/σ_c) through the small CNN, with BatchNorm."""
    from tests.engine.test_real_data import make_cifar10, make_mnist

    # Full CROWN of the CNN costs seconds per test image and member: 2 test images (the
    # fewest training-mode BatchNorm takes for the per-epoch accuracy), 2 members.
    make_mnist(tmp_path, n_train=24, n_test=2)
    make_cifar10(tmp_path, per_batch=4, n_test=2)
    variants = ["mnist/eps-0.1", "cifar10/eps-8_255"]
    cells = run_cells(light(SUITE.shortened(1)), load_objective("fast_ibp"), variants, [0, 1],
                      data_root=str(tmp_path))
    assert [(c.variant, c.status) for c in cells] == [(v, "ok") for v in variants for _ in "ab"], \
        cells[0].error
    assert all(set(c.metrics) == METRICS for c in cells)
    cifar = load_dataset("cifar10", str(tmp_path), False)
    box = Box.of(cifar)
    radius = box.radius(8 / 255).flatten()
    assert radius.tolist() == pytest.approx([8 / 255 / s for s in CIFAR_STD])
    lower, upper = box.limits(torch.from_numpy(cifar.x_test), 8 / 255)
    pixels_lo = lower * torch.tensor(CIFAR_STD).view(3, 1, 1) + torch.tensor(
        CIFAR_MEAN).view(3, 1, 1)
    assert float(pixels_lo.min()) >= -1e-6  # the box never leaves [0, 1] in pixel space
    assert certified_cnn(3, 32, 10).plain[-1].in_features == 100


# --- the reproduction ---------------------------------------------------------------------------

def _ibp_certifies_where_natural_training_does_not(suite):
    seeds = [0, 1, 2, 3, 4]
    runs = {n: run_cells(suite, load_objective(n), ["eps-0.1"], seeds) for n in ("ce", "ibp")}
    verified = {n: np.array([c.metrics["verified_acc"] for c in cells])
                for n, cells in runs.items()}
    assert verified["ce"].mean() < 0.3 and verified["ibp"].mean() > 0.65
    assert stats.compare_paired(verified["ibp"], verified["ce"]).prob_improvement >= 0.9
    for cells in runs.values():
        assert all(c.metrics["ibp_verified_acc"] <= c.metrics["verified_acc"]
                   <= c.metrics["pgd_acc"] <= c.metrics["clean_acc"] for c in cells)
    assert all(c.metrics["ibp_verified_acc"] == 0 for c in runs["ce"])


@pytest.mark.slow
def test_ibp_certifies_where_natural_training_does_not_in_40_epochs():
    """The finding below, small: the same 5 seeds and thresholds in 40 of the 100 epochs
    (verified: CE 0.17, IBP 0.68; at 30 epochs IBP's 0.655 is too near 0.65), with the
    light judge (the finding is about verified accuracy, which PGD does not enter)."""
    _ibp_certifies_where_natural_training_does_not(light(SUITE.shortened(40), chunk=5))


@pytest.mark.slow
@pytest.mark.reproduce
def test_ibp_certifies_where_natural_training_does_not():
    """The full protocol, 5 seeds × 100 epochs (`make reproduce`; README's reference
    results: verified CE 14.2 %, IBP 75.4 %)."""
    _ibp_certifies_where_natural_training_does_not(SUITE)


def test_suite_declaration_is_registered_and_complete():
    assert get_suite("certified") is SUITE
    assert SUITE.hooks == ("certified_loss",) and SUITE.lifts == ("classification_loss",)
    assert SUITE.headline == "verified_acc"
    assert SUITE.default_variants == ["eps-0.05", "eps-0.1"]
    real = [v for v in SUITE.variants if not v.default]
    assert {v.name for v in real} == {"mnist/eps-0.1", "mnist/eps-0.3", "cifar10/eps-2_255",
                                      "cifar10/eps-8_255"}
    assert all(v.queue == "gpu" for v in real)
    gap = SUITE.metric("ibp_gap")
    assert gap.better == "lower" and not gap.higher_is_better
