"""Calibration: are the predicted probabilities right, before and after temperature
scaling, in and out of distribution?

Two tracks in one suite. A *training objective* (``classification_loss``) trains the
suite's MLP with Adam for 30 epochs. A *post-hoc calibrator* (``posthoc_calibration``)
is fitted on the validation logits of the reference CE model of each seed (the very
model ``ce`` trains: same init, same data order) and maps its test logits to
probabilities. The trusted judge computes every metric, on the clean test set and on
test inputs under shift; a training objective is also judged after the judge's own
temperature scaling (README.md in this folder: the protocol and its deviations).
"""

from __future__ import annotations

from harness.contract.suite import (
    EPOCH,
    Anchors,
    Axis,
    CurveSpec,
    MetricSpec,
    ReliabilitySpec,
    Resources,
    Suite,
    Track,
    Tuning,
    Variant,
)
from harness.objectives.spec import HookSpec

POSTHOC = HookSpec(
    "posthoc_calibration", ("val_logits", "val_targets", "test_logits"),
    "(val_logits[N, K], val_targets[N], test_logits[M, K]) -> test probabilities [M, K]",
    smoke="suites.calibration.smoke:check_posthoc_calibration",
    context=(),
)

NOISE = (0.5, 1.0, 2.0)  # additive Gaussian noise, σ in feature standard deviations
DROPOUT = (0.2, 0.4, 0.6)  # share of features replaced by their training mean
BINS = 15

SETTINGS = {"model": "mlp-D-256-256-K", "epochs": 30, "batch_size": 128,
            "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "lr_schedule": "constant",
            "grad_clip": None, "bins": BINS, "temperature_fit": "validation NLL",
            "noise": list(NOISE), "dropout": list(DROPOUT)}


def _pct(name: str, label: str, short: str, description: str,
         better: str = "lower") -> MetricSpec:
    return MetricSpec(name, label, better=better, unit="percent", decimals=1, short=short,
                      description=description)


def _num(name: str, label: str, short: str, description: str) -> MetricSpec:
    return MetricSpec(name, label, better="lower", decimals=3, short=short,
                      description=description)


# The calibration metrics, each also after the judge's temperature scaling (suffix _ts).
_BASE = (
    _pct("ece", "ECE (15 equal-width bins, top label)", "ECE",
         "Expected calibration error: the sample-weighted gap between accuracy and mean "
         "confidence over 15 equal-width confidence bins."),
    _pct("adaece", "adaptive ECE (15 equal-mass bins)", "AdaECE",
         "ECE over 15 bins holding equally many samples."),
    _pct("classwise_ece", "classwise ECE", "cwECE",
         "Mean over classes of the ECE of that class's probability against its indicator."),
    _pct("mce", "maximum calibration error", "MCE",
         "The largest accuracy-confidence gap over non-empty bins."),
    _num("nll", "negative log-likelihood", "NLL", "Mean −log p of the true class."),
    _num("brier", "Brier score (summed over classes)", "Brier",
         "Mean over samples of Σ_k (p_k − 1[y = k])²."),
)


def _after_ts(m: MetricSpec) -> MetricSpec:
    return MetricSpec(f"{m.name}_ts", f"{m.label} after temperature scaling", better=m.better,
                      unit=m.unit, decimals=m.decimals, short=f"{m.short} TS",
                      description=f"{m.description} After the judge's temperature, fitted "
                                  f"on the validation logits (training objectives only).")


METRICS = (
    *_BASE,
    _pct("accuracy", "test accuracy", "acc", "Top-1 accuracy on the clean test set.",
         better="higher"),
    *(_after_ts(m) for m in _BASE),
    MetricSpec("temperature", "temperature fitted by the judge", better="neither", decimals=2,
               short="T", description="T minimizing validation NLL of softmax(z/T); above 1 "
                                      "means the model was overconfident."),
    _pct("ece_shift", "ECE under shift (mean of 6 shifted test sets)", "ECE shift",
         "Mean ECE over the test inputs under Gaussian noise σ ∈ {0.5, 1, 2} and feature "
         "dropout p ∈ {0.2, 0.4, 0.6}; calibrated on clean validation data only."),
    _pct("accuracy_shift", "accuracy under shift (mean of 6 shifted test sets)", "acc shift",
         "Mean top-1 accuracy over the same six shifted test sets.", better="higher"),
)

CURVES = (
    CurveSpec("train_loss", "training loss", EPOCH),
    CurveSpec("noise_levels", "Gaussian noise σ", Axis("level"), drawn=False),
    CurveSpec("ece_vs_noise", "ECE under Gaussian input noise", Axis("noise σ (feature SDs)"),
              unit="percent", decimals=1, x_values="noise_levels"),
    CurveSpec("dropout_levels", "feature dropout rate", Axis("level"), drawn=False),
    CurveSpec("ece_vs_dropout", "ECE under feature dropout", Axis("feature dropout rate"),
              unit="percent", decimals=1, x_values="dropout_levels"),
    CurveSpec("bin_confidence", "mean confidence in the bin", Axis("bin"), drawn=False),
    CurveSpec("bin_accuracy", "accuracy in the bin", Axis("bin"), drawn=False),
    CurveSpec("bin_count", "test samples in the bin", Axis("bin"), drawn=False),
)


def _variant(name: str, dataset: str, description: str) -> Variant:
    return Variant(name, {"dataset": dataset}, description)


SUITE = Suite(
    name="calibration",
    version="1.0",
    description="Expected calibration error of the predicted probabilities (lower is better).",
    hooks=("classification_loss", "posthoc_calibration"),
    hook_specs=(POSTHOC,),
    headline="ece",
    metrics=METRICS,
    # 0 is perfect calibration; 30% is worse than any baseline measured here.
    anchors={"ece": Anchors(worst=0.30, best=0.0)},
    variants=(
        _variant("synthetic", "synthetic", "make_classification, 10 classes, 40 features, "
                 "5% flipped labels; 12000/4000/4000"),
        _variant("digits", "digits", "scikit-learn digits, 1000/397/400: small and easy, "
                 "miscalibration barely shows"),
        Variant("cifar10", {"dataset": "cifar10"}, "CIFAR-10 45000/5000/10000 with a "
                "ResNet-20 (GroupNorm), real data", default=False, queue="gpu"),
    ),
    pipeline="suites.calibration.pipeline:Calibration",
    baselines=("ce", "focal3", "flsd53", "dual_focal", "label_smoothing", "brier", "spherical",
               "mmce", "squentropy",
               "identity", "temperature", "vector_scaling", "dirichlet_odir",
               "histogram_binning", "isotonic", "spline", "h_calibration"),
    reference="ce",
    # focal loss and temperature scaling against CE; GCE and LDR-KL as on noisy-labels and
    # certified, so that the three are scored on the same suites
    contrasts=("ce", "gce", "ldr_kl", "focal3", "temperature"),
    settings=SETTINGS,
    # The tuned protocol: Adam's learning rate (a decade either side of 1e-3) and its L2
    # weight decay up to 1e-4, for every training objective.
    tuning=Tuning({"lr": {"low": 1e-4, "high": 1e-2, "log": True},
                   "weight_decay": {"low": 0.0, "high": 1e-4}}, k=8,
                  selection="the trial with the lowest mean NLL on the validation split "
                            "(the suite's own, which temperature scaling fits on too)",
                  metric="nll"),
    curves=CURVES,
    reliability=ReliabilitySpec("bin_confidence", "bin_accuracy", "bin_count",
                                label="reliability of the top-label confidence (clean test)"),
    tracks=(
        Track("training", "training objectives", ("classification_loss",),
              columns=("ece_ts", "temperature", "accuracy", "nll")),
        Track("post-hoc", "post-hoc calibrators on CE", ("posthoc_calibration",),
              columns=("nll", "adaece", "accuracy", "ece_shift")),
    ),
    train_info={"posthoc": bool},
    # A 5-member synthetic run takes ~20 s on one core, post-hoc fits a few more; the
    # budget is per suite, so it also covers the opt-in CIFAR-10 ResNet on a GPU worker.
    resources=Resources(base_seconds=900, seconds_per_member=60),
)
