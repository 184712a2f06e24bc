"""What the two unlearning suites declare in common: the hook, the budget, the model.

No torch here: ``harness ls`` reads the suites' declarations without importing it.
"""

from __future__ import annotations

from typing import Any

from harness.contract.suite import Axis, CurveSpec, Fixture
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
}

EPOCH_AXIS = Axis("unlearning epoch")


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
