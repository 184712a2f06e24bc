"""Certified (L∞) robustness: how many test points are *provably* robust at ε?

Embedded default (README.md in this folder): scikit-learn's bundled digits in [0, 1] (no
normalisation), the digits suites' fixed stratified 1000/797 split, MLP 64-128-128-10,
100 epochs: 5 natural warm-up, 45 linear ε ramp, 50 at ε_train = 1.1·ε_test. Headline:
verified accuracy (IBP or CROWN verifies the sample).
"""

from __future__ import annotations

from harness.contract.suite import (
    EPOCH,
    Anchors,
    Axis,
    CurveSpec,
    MetricSpec,
    Resources,
    ScatterSpec,
    Suite,
    Tuning,
    Variant,
    VariantAxis,
)
from harness.objectives.spec import CONTEXT_NAMES, HookSpec

SETTINGS = {
    "model": "mlp-64-128-128-10 (real data: cnn 16-32-100)",
    "epochs": 100, "batch_size": 64, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9,
    "weight_decay": 0.0, "lr_schedule": "cosine", "grad_clip": 10.0,
    "warmup": 0.05, "ramp": 0.45, "eps_train_factor": 1.1,
    "train_pgd_steps": 10,
    "pgd": {"steps": 100, "restarts": 5, "step_size": 0.25, "decay_at": [0.5, 0.8, 0.9],
            "decay": 0.1},
    "eps_grid": [0.0, 0.5, 1.0, 1.5, 2.0],  # × ε_test
    "eval_chunk": 1024,
    "split": "digits stratified 1000/797", "x_scale": "x/16",
}

# The certified_loss hook: a classification hook's context, and (computed only for a hook
# that names them):
#   eps:      float, the current training radius ε_t in pixel units (0 in the warm-up).
#   eps_max:  float, ε_train, the radius ε_t ramps up to.
#   crown_ibp_worst_logits: a function of no arguments returning [B, C] worst-case
#             logits from CROWN-IBP margin bounds (CROWN with IBP intermediate bounds;
#             worst_logits are IBP's); lazy because it costs ~3 IBP passes: call it
#             only while its weight is non-zero.
#   bounds:   list of (lower, upper) IBP bounds for ONE member: the input box, then the
#             output of every Linear/Conv layer (pre-activation, BatchNorm folded in);
#             the last pair bounds the logits.
#   adv_logits: [B, C] logits on PGD adversarial inputs at ε_t (10 steps on CE).
CERTIFIED_LOSS = HookSpec(
    "certified_loss",
    ("logits", "worst_logits", "targets"),
    "(logits[B, C], worst_logits[B, C], targets[B]) -> per-sample loss [B] or a scalar",
    smoke="suites.certified.smoke:check_certified_loss",
    context=(*CONTEXT_NAMES, "eps", "eps_max", "crown_ibp_worst_logits", "bounds",
             "adv_logits"),
)


def _digits(eps: float) -> Variant:
    return Variant(f"eps-{eps:g}", {"dataset": "digits", "eps": eps},
                   f"digits, ε = {eps:g} (train at {1.1 * eps:.3g})")


def _real(name: str, dataset: str, eps: float, label: str, batch_size: int) -> Variant:
    return Variant(name, {"dataset": dataset, "eps": eps,
                          "settings": {"batch_size": batch_size}},
                   f"{label} (real data)", default=False, queue="gpu")


VARIANTS = (
    _digits(0.05),
    _digits(0.1),
    _real("mnist/eps-0.1", "mnist", 0.1, "MNIST, ε = 0.1", 256),
    _real("mnist/eps-0.3", "mnist", 0.3, "MNIST, ε = 0.3", 256),
    _real("cifar10/eps-2_255", "cifar10", 2 / 255, "CIFAR-10, ε = 2/255, ε/σ_c per channel", 128),
    _real("cifar10/eps-8_255", "cifar10", 8 / 255, "CIFAR-10, ε = 8/255, ε/σ_c per channel", 128),
)


def _percent(name: str, label: str, short: str, description: str) -> MetricSpec:
    return MetricSpec(name, label, unit="percent", decimals=1, short=short,
                      description=description)


def _gap(name: str, label: str, short: str, description: str) -> MetricSpec:
    return MetricSpec(name, label, better="lower", decimals=3, short=short,
                      description=description)


METRICS = (
    _percent("verified_acc", "verified accuracy (IBP or CROWN)", "verified",
             "Share of test points whose every margin lower bound z_y − z_j is positive "
             "under IBP or under CROWN, at ε_test."),
    _percent("clean_acc", "clean accuracy", "clean",
             "Top-1 accuracy on the unperturbed test set."),
    _percent("pgd_acc", "PGD accuracy", "PGD",
             "Share of test points no PGD point misclassifies (margin loss, 100 steps, 5 "
             "restarts). An upper bound on robust accuracy."),
    _percent("ibp_verified_acc", "IBP-verified accuracy", "IBP-ver",
             "Verified by interval bound propagation alone."),
    _percent("crown_verified_acc", "CROWN-verified accuracy", "CROWN-ver",
             "Verified by CROWN (backward linear relaxation) alone."),
    _gap("ibp_gap", "IBP bound gap", "IBP gap",
         "Mean over test points and wrong classes of the clean margin minus its IBP lower "
         "bound (logit units; lower = tighter)."),
    _gap("crown_gap", "CROWN bound gap", "CROWN gap",
         "As the IBP gap, for the CROWN lower bound."),
)

EPS = Axis("ε")  # the grid's radii, ε_test × (0, 0.5, 1, 1.5, 2)
CURVES = (
    CurveSpec("train_loss", "training loss", EPOCH),
    CurveSpec("grad_norm", "gradient norm before clipping", EPOCH, log=True),
    CurveSpec("clean_acc", "clean test accuracy", EPOCH, unit="percent", decimals=1),
    CurveSpec("eps_schedule", "training radius ε_t", EPOCH, decimals=4),
    CurveSpec("eps_grid", "ε grid", Axis("grid point"), decimals=4, drawn=False),
    CurveSpec("verified_vs_eps", "verified accuracy (IBP or CROWN)", EPS, unit="percent",
              decimals=1, x_values="eps_grid"),
    CurveSpec("ibp_verified_vs_eps", "IBP-verified accuracy", EPS, unit="percent",
              decimals=1, x_values="eps_grid"),
)

SUITE = Suite(
    name="certified",
    version="1.0",
    description="Verified (certified) accuracy under an L∞ perturbation of radius ε.",
    hooks=("certified_loss",),
    lifts=("classification_loss",),
    hook_specs=(CERTIFIED_LOSS,),
    headline="verified_acc",
    metrics=METRICS,
    anchors={"verified_acc": Anchors(worst=0.0, best=1.0)},
    variants=VARIANTS,
    pipeline="suites.certified.pipeline:Certified",
    # ``ce`` is the reference and trains naturally here.
    baselines=("ce", "ibp", "ibp_k0", "crown_ibp", "fast_ibp", "pgd_at"),
    reference="ce",
    # interval-bound training against CE on verified accuracy (and the noise-robust losses,
    # scored here as on noisy-labels and calibration)
    contrasts=("ce", "gce", "ldr_kl", "ibp"),
    settings=SETTINGS,
    tuning=Tuning({"lr": {"low": 0.005, "high": 0.5, "log": True},
                   "weight_decay": {"low": 0.0, "high": 5e-4}}, k=8,
                  selection="the trial with the highest mean verified accuracy (IBP or "
                            "CROWN, at the variant's ε) on a validation split: 10% of the "
                            "training set held out of training"),
    curves=CURVES,
    scatters=(ScatterSpec(x="clean_acc", y="verified_acc"),),
    variant_axis=VariantAxis("eps", "ε"),
    train_info={"training": dict},
    # Bound propagation in the loss makes a member several times a plain one.
    resources=Resources(base_seconds=300, seconds_per_member=120),
)
