"""Test-time adaptation: one set of hyperparameters per objective, judged on streams it
was not tuned for.

Each seed's source model (the suite's BN-MLP, trained with plain CE on clean digits by the
trusted side, a cached fixture) meets a stream of digits-C batches (the Hendrycks
corruptions ported to 8×8) and adapts online: one step per batch, Adam 1e-3 over the
BatchNorm affine parameters, test-batch statistics. An objective supplies an unsupervised
``tta_loss`` (TENT's slot) and/or an output-only ``tta_adjust`` of the batch's
probabilities (LAME's slot). The prediction counted is the one made before the batch's
update (online error). The scenarios are the variants; the headline is the mean online
error over them, and the worst scenario is shown beside it (README.md: the protocol and
its deviations).
"""

from __future__ import annotations

from harness.contract.suite import (
    Anchors,
    Axis,
    CurveSpec,
    Fixture,
    HeatmapSpec,
    MetricSpec,
    Resources,
    Suite,
    Tuning,
    Variant,
)
from harness.objectives.spec import HookSpec

# The 15 corruptions of the benchmark, then the 4 held out (suites.tta.corruptions).
CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
               "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
               "elastic_transform", "pixelate", "jpeg_compression")
HELD_OUT = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
SHORT = {"gaussian_noise": "gauss", "shot_noise": "shot", "impulse_noise": "impul",
         "defocus_blur": "defoc", "glass_blur": "glass", "motion_blur": "motn",
         "zoom_blur": "zoom", "snow": "snow", "frost": "frost", "fog": "fog",
         "brightness": "brit", "contrast": "contr", "elastic_transform": "elast",
         "pixelate": "pixel", "jpeg_compression": "jpeg"}
SEVERITIES = (1, 2, 3, 4, 5)
MEMORY = 64  # floats of per-member memory a tta_loss may keep across batches

CONTEXT = ("features", "progress", "memory", "params", "source_params", "fisher")
TTA_LOSS = HookSpec(
    "tta_loss", ("logits",),
    "(logits[B, K], *, features, progress, memory, params, source_params, fisher) -> "
    "unsupervised loss (scalar or [B]), minimized over the BatchNorm affine parameters",
    smoke="suites.tta.smoke:check_tta_loss",
    context=CONTEXT, mutable=("memory",),
    shared=("memory", "params", "source_params", "fisher"),
)
TTA_ADJUST = HookSpec(
    "tta_adjust", ("probs", "features"),
    "(probs[B, K], features[B, D], *, progress) -> adjusted probabilities [B, K]",
    smoke="suites.tta.smoke:check_tta_adjust",
    context=("progress",), mutable=(),
)

SETTINGS = {"optimizer": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "adam_eps": 1e-8,
            "weight_decay": 0.0, "steps_per_batch": 1, "adapted": "BatchNorm affine",
            "batch_size": 64, "severity": 5, "delta": 0.1, "prior_concentration": 1.0,
            "fisher_samples": 2000, "memory": MEMORY, "reset_ema": 0.9}


def _err(name: str, label: str, short: str, description: str) -> MetricSpec:
    return MetricSpec(name, label, better="lower", unit="percent", decimals=1, short=short,
                      description=description)


METRICS = (
    _err("online_error", "online error", "err",
         "Share of the stream's samples whose prediction, made before the batch's update, "
         "was wrong (for iid: over the 15 benchmark corruptions, each from a reset model)."),
    _err("clean_error", "clean error after adaptation (forgetting)", "clean",
         "Error on the clean digits of the pool, predicted in batches of the stream's size "
         "by the model as the stream left it (no further update)."),
    _err("heldout_error", "online error on the held-out corruptions", "held-out",
         "iid protocol on speckle noise, Gaussian blur, spatter and saturate: corruptions "
         "no objective was tuned on (iid scenario only)."),
    *(_err(f"error_{c}", f"online error on {c.replace('_', ' ')}", SHORT[c],
           f"Online error on the samples corrupted by {c.replace('_', ' ')}.")
      for c in CORRUPTIONS),
    *(_err(f"error_severity_{s}", f"online error at severity {s}", f"sev {s}",
           f"Online error on the samples at severity {s} (gradual scenario only).")
      for s in SEVERITIES),
    MetricSpec("resets", "resets by the objective's rule", better="neither", decimals=0,
               short="resets", description="Times the objective's reset rule "
               "(MODEL['reset_below']) put the model back to the source model."),
    MetricSpec("updated", "share of batches with an update", better="neither",
               unit="percent", decimals=0, short="upd.",
               description="Batches whose loss had a nonzero gradient (a zero gradient "
                           "takes no step)."),
)

CURVES = (
    CurveSpec("window_batches", "batch index", Axis("batch"), drawn=False),
    CurveSpec("online_error_curve", "online error along the stream",
              Axis("batch"), unit="percent", decimals=1, x_values="window_batches"),
)

SCENARIO_TEXT = {
    "iid": "each corruption at severity 5 from a reset model, shuffled",
    "continual": "the 15 corruptions at severity 5 in sequence, no reset",
    "correlated": "each corruption from a reset model, classes sorted by Dirichlet δ = 0.1",
    "mixed": "all 15 corruptions shuffled into one stream",
    "small-batch": "iid with batches of 4",
    "label-shift": "each corruption from a reset model, class priors ~ Dir(1)",
    "gradual": "severity 1→5→1 for each corruption in turn, no reset",
}


def _scenario(name: str) -> Variant:
    batch = 4 if name == "small-batch" else SETTINGS["batch_size"]
    return Variant(name, {"dataset": "digits", "scenario": name, "batch_size": batch},
                   f"digits-C: {SCENARIO_TEXT[name]} (batch {batch})")


SUITE = Suite(
    name="tta",
    version="1.0",
    description="Online error of a model adapting at test time to corrupted streams "
                "(lower is better).",
    hooks=("tta_loss", "tta_adjust"),
    hook_specs=(TTA_LOSS, TTA_ADJUST),
    headline="online_error",
    metrics=METRICS,
    # 0 is no error; 90% is chance on ten classes.
    anchors={"online_error": Anchors(worst=0.90, best=0.0)},
    variants=(
        *(_scenario(s) for s in SCENARIO_TEXT),
        Variant("cifar10c", {"dataset": "cifar10", "scenario": "continual", "batch_size": 200},
                "CIFAR-10-C continual at severity 5 (batch 200), a BN-CNN source model "
                "trained by the harness; real data", default=False, queue="gpu"),
    ),
    pipeline="suites.tta.pipeline:TestTimeAdaptation",
    baselines=("source", "bn_stats", "tent", "eata", "sar", "shot_im", "pseudo_label", "lame"),
    reference="source",
    # entropy minimisation (TENT) against LAME, which never updates the model
    contrasts=("source", "tent", "lame"),
    settings=SETTINGS,
    # The tuned protocol: Adam's learning rate, a decade either side of 1e-3, for every
    # objective (those with no tta_loss have only their own knobs to tune, or none: the
    # source row tunes nothing and its tuned numbers are its defaults'); trials are chosen
    # on streams of the four corruptions the benchmark never streams.
    tuning=Tuning({"lr": {"low": 1e-4, "high": 1e-2, "log": True}}, k=8,
                  validation_share=None,
                  validation="the same scenario's streams over the 4 held-out corruptions "
                             "(speckle noise, Gaussian blur, spatter, saturate), never the "
                             "15 of the benchmark",
                  selection="the trial with the lowest mean online error on the held-out "
                            "corruptions' streams",
                  hooks=("tta_loss", "tta_adjust")),
    curves=CURVES,
    # per corruption: the heatmap; per severity: the gradual scenario's own columns
    columns=("clean_error", "heldout_error", *(f"error_severity_{s}" for s in SEVERITIES),
             "resets", "updated"),
    heatmap=HeatmapSpec(tuple(f"error_{c}" for c in CORRUPTIONS),
                        "online error per corruption (mean over seeds)"),
    fixtures=(
        Fixture("digits_c", "suites.tta.source:build_digits_c", {"pool": "digits-797"},
                code=("suites.tta.corruptions",)),
        Fixture("source_model", "suites.tta.source:build_source_model",
                {"dataset": "digits", "architecture": "bn-mlp", "epochs": 40, "lr": 1e-3,
                 "batch_size": 64}, code=("suites.tta.model",)),
    ),
    train_info={"options": dict},
    resources=Resources(base_seconds=600, seconds_per_member=120),
)
