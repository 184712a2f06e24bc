"""What the two unlearning suites declare in common: the hook, the budget, the model.

No torch here: ``harness ls`` reads the suites' declarations without importing it.
"""

from __future__ import annotations

from typing import Any

from harness.contract.suite import Axis, CurveSpec, Fixture, MetricSpec, Tuning
from harness.objectives.spec import HookSpec

# Context an ``unlearning_loss`` may name; the trainer computes only what it names.
CONTEXT = ("progress", "ref_forget", "ref_retain", "idk", "ref_idk", "hidden_forget",
           "hidden_retain", "ref_hidden_forget", "ref_hidden_retain", "control_vector")
UNLEARNING_LOSS = HookSpec(
    "unlearning_loss", ("forget", "retain"),
    "(forget: LMBatch, retain: LMBatch, *, progress, ref_forget, ref_retain, idk, ref_idk, "
    "hidden_forget, hidden_retain, ref_hidden_forget, ref_hidden_retain, control_vector) "
    "-> scalar loss, minimized over every parameter of the target model",
    smoke="suites.unlearning.smoke:check_unlearning_loss",
    context=CONTEXT, mutable=(), shared=("control_vector",),
)

# Both suites' default run, the reference (the target, untouched) first.
BASELINES = ("target", "grad_ascent", "grad_diff", "grad_diff_kl", "npo", "npo_rt", "simnpo",
             "idk_nll", "idk_dpo", "rmu", "satimp", "wga", "undial")

# The mini model (suites.unlearning.model) and how its fixtures train.
MODEL = {"d_model": 64, "layers": 2, "heads": 4, "mlp": 256, "max_length": 128}
FIXTURE_TRAINING = {"epochs": 60, "lr": 3e-3, "warmup_epochs": 1.0, "batch_size": 32,
                    "weight_decay": 0.01, "stop_exact": 0.95, "corpus_seed": 0}

# The unlearning budget, the same for every objective: the objective supplies the loss.
SETTINGS: dict[str, Any] = {
    "optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.0, "betas": [0.9, 0.999],
    "adam_eps": 1e-8, "lr_schedule": "constant", "grad_clip": 1.0, "epochs": 5,
    "batch_size": 32, "hidden_layer": 1, "replicas": 5,
    # Relearning attack (trusted, after unlearning): fine-tune on these attributes of every
    # forget entity (both questions of each), then measure the others.
    "relearn_attributes": 2, "relearn_steps": 10, "relearn_lr": 1e-3,
    "max_new_tokens": 32,
    # Quantization attack (trusted, after unlearning; suites/unlearning/quantize.py): the
    # unlearned linear weights rounded to 8 and 4 bits per output channel, and to 4 bits
    # in groups of this many inputs.
    "quant_group": 32,
}

EPOCH_AXIS = Axis("unlearning epoch")

# A ratio is withheld (absent, with the reason in the cell's info) when its denominator is
# under these floors: a share of a near-zero drop is noise (SatImp's relearning recovery
# came out −7 to −34 over a drop of ~0.001). Relearning recovery needs unlearning to have
# lowered the held-back score by this much (TOFU: probability; MUSE: KnowMem points, 0–100);
# utility retained needs the target's model utility at least this.
RECOVERY_FLOOR = {"tofu": 0.05, "muse": 5.0}
UTILITY_FLOOR = 0.05


def fixtures(benchmark: str) -> tuple[Fixture, ...]:
    code = ("suites.unlearning.corpus", "suites.unlearning.tokenizer",
            "suites.unlearning.data", "suites.unlearning.lm", "suites.unlearning.model",
            "suites.unlearning.text")
    base = {"benchmark": benchmark, **MODEL, **FIXTURE_TRAINING}
    return (Fixture("target", "suites.unlearning.fixtures:build_model",
                    {**base, "train_on": "full"}, code=code),
            Fixture("retain", "suites.unlearning.fixtures:build_model",
                    {**base, "train_on": "retain"}, code=code))


def trajectory(name: str, label: str, unit: str = "number", log: bool = False) -> CurveSpec:
    """A metric after each unlearning epoch, epoch 0 being the target itself."""
    return CurveSpec(name, label, EPOCH_AXIS, unit=unit, log=log, x_values="epochs")


EPOCHS_CURVE = CurveSpec("epochs", "unlearning epoch", EPOCH_AXIS, drawn=False)

# The quantization attack's roundings, declared once (suites.unlearning.quantize builds
# them; it needs torch, this module does not): name, what the columns and the robustness
# view call it, bits, and whether one scale covers ``quant_group`` inputs (else a row).
QUANT_SCHEMES = (("int8", "8-bit", 8, False), ("int4", "4-bit", 4, False),
                 ("int4_group", "4-bit grouped", 4, True))
# The rounding after which utility is measured too, and whose recovery is reported.
QUANT_HEADLINE = "int4"

# The robustness view: one number of the unlearned model, then after each attack.
ATTACK_AXIS = Axis("attack", ticks=("unlearned", "relearned",
                                    *(label for _, label, _, _ in QUANT_SCHEMES)))


def under_attack(label: str) -> CurveSpec:
    """``label`` (measured on the forget questions the relearning attack does not train
    on) for the unlearned model and after each attack: relearning, then each rounding."""
    return CurveSpec("held_back_under_attack", label, ATTACK_AXIS)


# The tuned protocol (docs/tuning.md), the same on both suites: AdamW's learning rate a
# decade either side of the budget's 1e-3, and each objective's own declared knobs, chosen
# by MUSE's stopping rule applied to the data an unlearner holds (the forget set it
# unlearns, the retain set it may draw on) with the seed's retain model as the bar; never
# the judge's evaluation splits. Two search seeds: each is two fixture models to build, and
# a cell's training is the whole cost (TinyLMs gain nothing from stacking).
TUNING = Tuning(
    {"lr": {"low": 1e-4, "high": 1e-2, "log": True}}, k=8, validation_share=None,
    validation="the forget set the objective unlearns and the retain set it may draw on "
               "(teacher-forced answer probability after the last epoch), against the "
               "seed's retain model on the same forget set",
    selection="MUSE's rule on that data: among the trials whose forget-set probability fell "
              "to the retain model's or below, the one that kept the most retain-set "
              "probability; while none did, the one that came closest",
    metric="val_select", search_seeds=(1000, 1001))

VALIDATION_METRICS = (
    MetricSpec("val_forget", "forget-set probability (tuned search)", better="lower",
               decimals=3, short="val F",
               description="Tuned search only: mean length-normalised probability of the "
                           "forget set's answers (and passages) the objective unlearned, "
                           "after its last epoch."),
    MetricSpec("val_retain", "retain-set probability (tuned search)", better="higher",
               decimals=3, short="val R",
               description="Tuned search only: the same on the retain set the objective may "
                           "draw on."),
    MetricSpec("val_select", "MUSE's rule on the training data (tuned search)",
               better="higher", decimals=3, short="val sel",
               description="Tuned search only: val_retain when val_forget is at most the "
                           "seed's retain model's on the same forget set (the bar MUSE "
                           "stops at), else minus the gap above that bar: every trial that "
                           "forgot ranks above every one that did not."),
)


GROUPED = f", one scale per {SETTINGS['quant_group']} inputs"


def quantization_metrics(measured: tuple[tuple[str, str, str, str], ...],
                         utility: tuple[str, str, str, str], anchor: str, recovery: str,
                         decimals: int) -> tuple[MetricSpec, ...]:
    """What the quantization attack adds to a suite's metrics: each of ``measured``
    (name, label, better, short) after each rounding, ``utility`` after 4 bits per channel
    (``quantize.schemes``), the retain model's ``anchor`` after each rounding (what it
    does to a model that never learned the forget set), and ``quant_recovery`` described
    by ``recovery``."""
    out = [MetricSpec(f"{q}_{name}", f"{label} after {text}", better=better,
                      decimals=decimals, short=f"{short} {q}",
                      description=f"{label} of the unlearned model with its linear weights "
                                  f"rounded to {text} (round-to-nearest"
                                  f"{GROUPED if 'group' in q else ', per output channel'}).")
           for q, text, _, _ in QUANT_SCHEMES for name, label, better, short in (
               *measured, *((utility,) if q == QUANT_HEADLINE else ()))]
    label = next(m[1] for m in measured if m[0] == anchor)
    out += [MetricSpec(f"retain_model_{q}_{anchor}", f"retain model's {label} after {text}",
                       better="neither", decimals=decimals, short=f"{anchor} {q}(ret)",
                       description=f"The seed's retain model rounded the same way: what "
                                   f"{text} rounding does to a model that never learned "
                                   f"the forget set.")
            for q, text, _, _ in QUANT_SCHEMES]
    out.append(MetricSpec("quant_recovery", "knowledge recovered by 4-bit quantization",
                          better="lower", decimals=3, short="q4 recov.",
                          description=recovery))
    return tuple(out)
