"""Certified (L∞) robustness: how many test points are *provably* robust at ε?

Embedded default (PROTOCOLS.md §2.6): scikit-learn's bundled digits in [0, 1] (no
normalisation), the noisy-label suite's fixed stratified 1000/797 split, MLP
64-128-128-10, 100 epochs: 5 natural warm-up, 45 linear ε ramp, 50 at
ε_train = 1.1·ε_test. Headline: verified accuracy (IBP or CROWN verifies the sample).
"""

from __future__ import annotations

from suites.base import MetricSpec, Resources, Suite, Variant

PROTOCOL = {
    "model": "mlp-64-128-128-10 (real data: cnn 16-32-100)",
    "epochs": 100, "batch_size": 64, "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0,
    "lr_schedule": "cosine", "grad_clip": 10.0,
    "warmup": 0.05, "ramp": 0.45, "eps_train_factor": 1.1,
    "train_pgd_steps": 10,
    "pgd": {"steps": 100, "restarts": 5, "step_size": 0.25, "decay_at": [0.5, 0.8, 0.9],
            "decay": 0.1},
    "eps_grid": [0.0, 0.5, 1.0, 1.5, 2.0],  # × ε_test
    "eval_chunk": 1024,
    "split": "digits stratified 1000/797", "x_scale": "x/16",
}


def _digits(eps: float) -> Variant:
    return Variant(f"eps-{eps:g}", {"dataset": "digits", "eps": eps},
                   f"digits, ε = {eps:g} (train at {1.1 * eps:.3g})")


def _real(name: str, dataset: str, eps: float, label: str, batch_size: int) -> Variant:
    return Variant(name, {"dataset": dataset, "eps": eps,
                          "protocol": {"batch_size": batch_size}},
                   f"{label} (real data)", default=False, queue="gpu")


VARIANTS = (
    _digits(0.05),
    _digits(0.1),
    _real("mnist/eps-0.1", "mnist", 0.1, "MNIST, ε = 0.1", 256),
    _real("mnist/eps-0.3", "mnist", 0.3, "MNIST, ε = 0.3", 256),
    _real("cifar10/eps-2_255", "cifar10", 2 / 255, "CIFAR-10, ε = 2/255, ε/σ_c per channel", 128),
    _real("cifar10/eps-8_255", "cifar10", 8 / 255, "CIFAR-10, ε = 8/255, ε/σ_c per channel", 128),
)

METRICS = (
    MetricSpec("verified_acc", "verified accuracy (IBP or CROWN)", percent=True,
               short="verified",
               description="Share of test points whose every margin lower bound z_y − z_j is "
                           "positive under IBP or under CROWN, at ε_test."),
    MetricSpec("clean_acc", "clean accuracy", percent=True, short="clean",
               description="Top-1 accuracy on the unperturbed test set."),
    MetricSpec("pgd_acc", "PGD accuracy", percent=True, short="PGD",
               description="Share of test points no PGD point misclassifies (margin loss, 100 "
                           "steps, 5 restarts). An upper bound on robust accuracy."),
    MetricSpec("ibp_verified_acc", "IBP-verified accuracy", percent=True, short="IBP-ver",
               description="Verified by interval bound propagation alone."),
    MetricSpec("crown_verified_acc", "CROWN-verified accuracy", percent=True, short="CROWN-ver",
               description="Verified by CROWN (backward linear relaxation) alone."),
    MetricSpec("ibp_gap", "IBP bound gap", higher_is_better=False, short="IBP gap",
               description="Mean over test points and wrong classes of the clean margin "
                           "minus its IBP lower bound (logit units; lower = tighter)."),
    MetricSpec("crown_gap", "CROWN bound gap", higher_is_better=False, short="CROWN gap",
               description="As the IBP gap, for the CROWN lower bound."),
)

SUITE = Suite(
    name="certified",
    version="1.0",
    hook="certified_loss",
    description="Verified (certified) accuracy under an L∞ perturbation of radius ε.",
    headline="verified_acc",
    metrics=METRICS,
    variants=VARIANTS,
    runner="suites.certified.protocol",
    reference="ce",
    protocol=PROTOCOL,
    # Bound propagation in the loss makes a member several times a plain one.
    resources=Resources(base_seconds=300, seconds_per_member=120),
)
