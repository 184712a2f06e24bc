"""TOFU-style unlearning: forget fictitious authors without losing everything else.

Each seed's target model (the suite's tiny causal LM, trained by the trusted side on the
whole generated mini-TOFU corpus) is unlearned on the forget authors' QA with the
objective's ``unlearning_loss``: AdamW at lr 1e-3 for 5 epochs, batch 32, every parameter
trained; only the loss is the objective's. The judge measures forget quality (the KS test
of truth ratios against the seed's retain model, never trained on the forget authors) and
model utility (the harmonic mean of nine numbers on retained authors, world facts and
known entities), their trajectories over the epochs, and what a relearning attack brings
back (README.md in this folder: protocol, metrics, deviations).
"""

from __future__ import annotations

from harness.contract.suite import (
    Anchors,
    CurveSpec,
    MetricSpec,
    Resources,
    ScatterSpec,
    Suite,
    Variant,
)
from suites.unlearning.spec import (
    BASELINES,
    EPOCHS_CURVE,
    SETTINGS,
    TUNING,
    UNLEARNING_LOSS,
    VALIDATION_METRICS,
    fixtures,
    quantization_metrics,
    trajectory,
    under_attack,
)


def _m(name: str, label: str, better: str, short: str, description: str, *,
       unit: str = "number", decimals: int = 3) -> MetricSpec:
    return MetricSpec(name, label, better=better, unit=unit, decimals=decimals, short=short,
                      description=description)


SPLITS = {"retain": ("retained authors", "ret"), "wf": ("world facts", "wf"),
          "ke": ("known entities", "ke")}

METRICS = (
    _m("score", "unlearning score", "higher", "score",
       "u·(1 + q)/2: u = model utility relative to the seed's target (clipped to [0, 1]), "
       "q = forget quality on a log scale from the target's level (1e-30 → 0) to "
       "indistinguishable from retraining (0.05 → 1). The target scores 0.5, a collapsed "
       "model ≈ 0, a retrained one ≈ 1."),
    _m("forget_quality", "forget quality (KS p-value)", "higher", "FQ",
       "p-value of the two-sided KS test between the per-question truth ratios of the "
       "unlearned model and of the seed's retain model on the forget QA.", unit="pvalue"),
    _m("log_forget_quality", "log10 forget quality", "higher", "log FQ",
       "log10 of the KS p-value (coarse at this size: shown with the KS statistic).",
       decimals=1),
    _m("ks_statistic", "KS statistic", "lower", "KS",
       "The KS distance between the two truth-ratio samples (0 = identical)."),
    _m("model_utility", "model utility", "higher", "MU",
       "Harmonic mean of probability, ROUGE-L recall and truth ratio on the retained "
       "authors, the world facts and the known entities."),
    _m("utility_retained", "utility relative to the target", "higher", "MU/tgt",
       "Model utility divided by the seed's target model's; withheld (–) when the "
       "target's is under 0.05."),
    _m("forget_prob", "forget probability", "lower", "P(f)",
       "Mean length-normalised probability of the forget answers."),
    _m("forget_rouge", "forget ROUGE-L recall", "lower", "R(f)",
       "ROUGE-L recall of the greedy answers to the forget questions."),
    _m("forget_truth_ratio", "forget truth ratio", "higher", "TR(f)",
       "Mean min(R, 1/R) of the truth ratios on the forget QA (1 = undecided)."),
    _m("extraction_strength", "extraction strength", "lower", "ES",
       "1 − k*/|a|: how short a prefix of the answer makes the model produce the rest."),
    *(_m(f"{key}_{what}", f"{label}: {text}", "higher", f"{short} {abbr}",
         f"{text} on the {label} (a model-utility component).")
      for key, (label, short) in SPLITS.items()
      for what, text, abbr in (("prob", "probability", "P"), ("rouge", "ROUGE-L recall", "R"),
                               ("truth_ratio", "truth ratio", "TR"))),
    _m("held_back_prob", "forget probability on the held-back questions", "lower",
       "P(held)", "Forget probability on the forget questions outside the relearning "
       "attack's set, before the attack."),
    _m("relearn_forget_prob", "forget probability after relearning", "lower", "relearn P",
       "Forget probability on the held-back forget questions after the relearning attack."),
    _m("relearn_recovery", "knowledge recovered by relearning", "lower", "recov.",
       "(P after the attack − P unlearned) / (P target − P unlearned) on the held-back "
       "forget questions: the share of the forgotten probability the attack brings back. "
       "Withheld (–) when unlearning lowered P by less than 0.05: a share of almost "
       "nothing is noise (the cell's info says so)."),
    _m("retain_model_fq", "forget quality of another retain model", "neither", "FQ(ret)",
       "Median KS p-value of the replica retain models against the seed's retain model: "
       "what retraining from scratch scores (the gold standard).", unit="pvalue"),
    _m("retain_model_utility", "retain model's utility", "neither", "MU(ret)",
       "Model utility of the seed's retain model (the gold standard)."),
    _m("target_utility", "target model's utility", "neither", "MU(tgt)",
       "Model utility of the seed's target model before unlearning."),
    *quantization_metrics(
        (("forget_prob", "forget probability", "lower", "P(f)"),
         ("forget_truth_ratio", "forget truth ratio", "higher", "TR(f)"),
         ("log_forget_quality", "log10 forget quality", "higher", "log FQ")),
        ("model_utility", "model utility", "higher", "MU"), "forget_prob",
        "(P(f) after 4-bit − P(f) unlearned) / (P(f) target − P(f) unlearned), 4-bit "
        "round-to-nearest per output channel: the share of the forgotten probability "
        "rounding brings back. Withheld (–) when unlearning lowered P(f) by less than "
        "0.05 (the cell's info says so).", decimals=3),
    *VALIDATION_METRICS,  # a tuned search's, on the data an unlearner holds
)

CURVES = (
    EPOCHS_CURVE,
    trajectory("fq_trajectory", "log10 forget quality"),
    trajectory("mu_trajectory", "model utility"),
    trajectory("forget_prob_trajectory", "forget probability"),
    CurveSpec("train_loss", "unlearning loss"),
    under_attack("forget probability, held-back questions"),  # the robustness view
)


def _variant(forget: int) -> Variant:
    return Variant(f"forget{forget:02d}", {"benchmark": "tofu", "forget": forget},
                   f"mini-TOFU: forget {forget} of 100 authors ({20 * forget} QA)")


MODEL_REPO = "open-unlearning/tofu_Llama-3.2-1B-Instruct"


def _released(forget: int) -> Variant:
    """The released TOFU and a model fine-tuned on it, from the data root (README.md)."""
    retain = f"retain{100 - forget}"
    return Variant(
        f"tofu/forget{forget:02d}",
        {"benchmark": "tofu", "forget": forget, "source": "released",
         "data": "unlearning/tofu", "data_repo": "locuslab/TOFU",
         "target": "unlearning/tofu-target", "target_repo": f"{MODEL_REPO}_full",
         "retain": f"unlearning/tofu-{retain}", "retain_repo": f"{MODEL_REPO}_{retain}",
         "template": "auto", "relearn_share": 0.2},
        f"TOFU forget{forget:02d} with a Llama fine-tuned on it ({retain} model as the "
        f"reference); real data", default=False, queue="gpu")


SUITE = Suite(
    name="unlearning-tofu",
    version="1.0",
    description="Forget quality and model utility after unlearning fictitious authors "
                "(TOFU-style, generated corpus, a tiny causal LM).",
    hooks=("unlearning_loss",),
    hook_specs=(UNLEARNING_LOSS,),
    headline="score",
    metrics=METRICS,
    anchors={"score": Anchors(worst=0.0, best=1.0)},
    variants=(_variant(5), _variant(10), _released(5), _released(10)),
    pipeline="suites.unlearning.pipeline:Unlearning",
    shared_code=("suites.unlearning",),
    baselines=BASELINES,
    reference="target",
    # gradient ascent against the losses that also keep the retained data
    contrasts=("target", "grad_ascent", "grad_diff", "npo"),
    settings={**SETTINGS, "benchmark": "tofu"},
    tuning=TUNING,
    curves=CURVES,
    # the Pareto view; relearning: held-back forget probability before → after the attack
    scatters=(ScatterSpec(x="model_utility", y="log_forget_quality"),
              ScatterSpec(x="held_back_prob", y="relearn_forget_prob")),
    # forget quality and model utility side by side (the CLI shows the first two)
    columns=("log_forget_quality", "model_utility", "ks_statistic", "forget_prob",
             "forget_rouge", "extraction_strength", "relearn_recovery", "int8_forget_prob",
             "int4_forget_prob", "quant_recovery", "retain_model_fq"),
    fixtures=fixtures("tofu"),
    train_info={"options": dict},
    resources=Resources(base_seconds=600, seconds_per_member=120),
    # Each seed trains alone (harness/contract/chunks.py): stacking TinyLMs gains nothing (5 members
    # vmapped take 1.27x a loop over them, bench/unlearning_model.py), a real model is not
    # stacked at all, and a rerun of one seed then trains (and builds fixtures for) one.
    chunk=1,
)
