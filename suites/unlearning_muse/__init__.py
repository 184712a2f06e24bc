"""MUSE-style unlearning: forget the text a model memorised, verbatim and as knowledge.

Each seed's target (the tiny causal LM trained by the trusted side on the generated
bio passages and QA of 100 fictitious authors) is unlearned on the forget authors'
passages with the objective's ``unlearning_loss`` (the same budget as unlearning-tofu:
AdamW lr 1e-3, 5 epochs, batch 32; the retain set is the other authors' passages). The
judge measures verbatim memorisation of the forget passages, knowledge of the forget and
retained authors, and privacy leakage (the Min-40% membership AUC against the seed's
retain model's), their trajectories, and what a relearning attack brings back
(README.md in this folder).
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


def _m(name: str, label: str, better: str, short: str, description: str,
       decimals: int = 1) -> MetricSpec:
    return MetricSpec(name, label, better=better, decimals=decimals, short=short,
                      description=description)


METRICS = (
    _m("score", "unlearning score", "higher", "score",
       "u·(1 + q)/2: u = KnowMem on retained authors relative to the seed's target "
       "(clipped to [0, 1]), q = the mean share of the way from the target to the seed's "
       "retain model on VerbMem and KnowMem of the forget authors. The target scores 0.5, "
       "a collapsed model ≈ 0, one like the retain model ≈ 1.", decimals=3),
    _m("verbmem_forget", "VerbMem on forget passages", "lower", "VerbMem",
       "ROUGE-L F1 ×100 between the greedy continuation of each forget passage's first 32 "
       "tokens and the passage's rest."),
    _m("knowmem_forget", "KnowMem on forget QA", "lower", "KnowMem f",
       "ROUGE-L F1 ×100 of the greedy answers to the forget authors' questions."),
    _m("knowmem_retain", "KnowMem on retained QA", "higher", "KnowMem r",
       "ROUGE-L F1 ×100 of the greedy answers to 20 retained authors' questions (utility)."),
    _m("privleak", "PrivLeak", "neither", "PrivLeak",
       "(AUC − AUC of the retain model) / AUC of the retain model ×100, AUC of the Min-40% "
       "membership score, forget passages against 30 holdout authors' passages. ≈ 0 is "
       "ideal; ≫ 0 the model still remembers, ≪ 0 it over-unlearned. The headline's "
       "attack (MUSE's own); the others are privleak_<attack>."),
    _m("privleak_loss", "PrivLeak (LOSS attack)", "neither", "PL loss",
       "PrivLeak with the LOSS attack: a passage's mean negative log-likelihood."),
    _m("privleak_zlib", "PrivLeak (zlib attack)", "neither", "PL zlib",
       "PrivLeak with the zlib attack: the LOSS score over the passage's zlib-compressed "
       "size, so that merely predictable text is not taken for memorised."),
    _m("privleak_reference", "PrivLeak (reference-model attack)", "neither", "PL ref",
       "PrivLeak with the reference attack: the model's LOSS score minus a retain "
       "replica's (a model never trained on the forget authors) on the same passage."),
    _m("privleak_min_k_plus_plus", "PrivLeak (Min-K%++ attack)", "neither", "PL Min-K++",
       "PrivLeak with Min-K%++: each token's log-probability standardised by the model's "
       "own next-token distribution, the lowest 40% averaged."),
    _m("privleak_worst", "PrivLeak, worst attack", "neither", "PL worst",
       "The PrivLeak farthest from 0 over the five attacks (Min-40%, LOSS, zlib, reference, "
       "Min-K%++), sign kept: the honest number, since the attacks disagree; the cell's "
       "info names the attack."),
    _m("held_back_knowmem", "KnowMem on held-back forget QA", "lower", "KnowMem held",
       "KnowMem on the forget questions outside the relearning attack's set, before it."),
    _m("relearn_knowmem_forget", "KnowMem on held-back forget QA after relearning", "lower",
       "relearn K", "KnowMem on the forget questions not in the relearning attack's set, "
       "after the attack."),
    _m("relearn_recovery", "knowledge recovered by relearning", "lower", "recov.",
       "(KnowMem after − KnowMem unlearned) / (KnowMem target − KnowMem unlearned) on the "
       "held-back forget questions; withheld (–) when unlearning lowered KnowMem by less "
       "than 5 points: a share of almost nothing is noise (the cell's info says so).",
       decimals=3),
    _m("target_verbmem", "target's VerbMem", "neither", "VerbMem(tgt)",
       "VerbMem of the seed's target before unlearning."),
    _m("target_knowmem_forget", "target's KnowMem on forget QA", "neither", "KnowMem f(tgt)",
       "KnowMem on the forget QA of the seed's target before unlearning."),
    _m("retain_model_knowmem_forget", "retain model's KnowMem on forget QA", "neither",
       "KnowMem f(ret)", "What a model never trained on the forget authors scores (the "
       "gold standard; templates overlap, so it is not 0)."),
    _m("target_privleak", "target's PrivLeak", "neither", "PrivLeak(tgt)",
       "PrivLeak of the seed's target before unlearning (≫ 0: it remembers)."),
    *quantization_metrics(
        (("verbmem_forget", "VerbMem on forget passages", "lower", "VerbMem"),
         ("knowmem_forget", "KnowMem on forget QA", "lower", "KnowMem f")),
        ("knowmem_retain", "KnowMem on retained QA", "higher", "KnowMem r"), "knowmem_forget",
        "(KnowMem f after 4-bit − KnowMem f unlearned) / (KnowMem f target − KnowMem f "
        "unlearned), 4-bit round-to-nearest per output channel: the share of the forgotten "
        "answers rounding brings back. Withheld (–) when unlearning lowered KnowMem f by "
        "less than 5 points (the cell's info says so).", decimals=1),
    *VALIDATION_METRICS,  # a tuned search's, on the data an unlearner holds
)

CURVES = (
    EPOCHS_CURVE,
    trajectory("verbmem_trajectory", "VerbMem (forget)"),
    trajectory("knowmem_forget_trajectory", "KnowMem (forget)"),
    trajectory("knowmem_retain_trajectory", "KnowMem (retain)"),
    CurveSpec("train_loss", "unlearning loss"),
    under_attack("KnowMem, held-back forget QA"),  # the robustness view
)

SUITE = Suite(
    name="unlearning-muse",
    version="1.0",
    description="Verbatim and knowledge memorisation, privacy leakage and utility after "
                "unlearning bio passages (MUSE-style, generated corpus, a tiny causal LM).",
    hooks=("unlearning_loss",),
    hook_specs=(UNLEARNING_LOSS,),
    headline="score",
    metrics=METRICS,
    anchors={"score": Anchors(worst=0.0, best=1.0)},
    variants=(Variant("forget10", {"benchmark": "muse", "forget": 10},
                      "mini-MUSE: forget the 30 passages of 10 of 100 authors"),
              # the released MUSE-News and its target/retrained models (README.md)
              Variant("muse/news", {"benchmark": "muse", "source": "released",
                                    "corpus": "news", "data": "unlearning/muse-news",
                                    "data_repo": "muse-bench/MUSE-News",
                                    "target": "unlearning/muse-news-target",
                                    "target_repo": "muse-bench/MUSE-news_target",
                                    "retain": "unlearning/muse-news-retrain",
                                    "retain_repo": "muse-bench/MUSE-news_retrain",
                                    "template": "plain", "max_tokens": 2048,
                                    "relearn_share": 0.2},
                      "MUSE-News with its Llama-2 7B target and retrained models; real data",
                      default=False, queue="gpu")),
    pipeline="suites.unlearning.pipeline:Unlearning",
    shared_code=("suites.unlearning",),
    baselines=BASELINES,
    reference="target",
    # one retain replica: the reference model of PrivLeak's reference attack
    settings={**SETTINGS, "benchmark": "muse", "replicas": 1},
    tuning=TUNING,
    curves=CURVES,
    scatters=(ScatterSpec(x="knowmem_retain", y="knowmem_forget"),
              ScatterSpec(x="held_back_knowmem", y="relearn_knowmem_forget")),
    columns=("verbmem_forget", "knowmem_forget", "knowmem_retain", "privleak",
             "privleak_worst", "relearn_recovery", "int8_knowmem_forget",
             "int4_knowmem_forget", "quant_recovery"),
    fixtures=fixtures("muse"),
    train_info={"options": dict},
    resources=Resources(base_seconds=600, seconds_per_member=120),
    # Each seed trains alone (harness/contract/chunks.py): stacking TinyLMs gains nothing (5 members
    # vmapped take 1.27x a loop over them, bench/unlearning_model.py), a real model is not
    # stacked at all, and a rerun of one seed then trains (and builds fixtures for) one.
    chunk=1,
)
