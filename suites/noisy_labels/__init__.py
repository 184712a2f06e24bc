"""Noisy-label classification: does the objective resist label noise?

Embedded default: scikit-learn's bundled digits (x/16), a fixed stratified 1000/797
split, MLP 64-256-256-10, SGD momentum 0.9, lr 0.05 cosine, batch 64, 100 epochs
(PROTOCOLS.md §1.7). The test labels are always clean.
"""

from __future__ import annotations

from suites.base import MetricSpec, Resources, Suite, Variant

PROTOCOL = {"model": "mlp-64-256-256-10", "epochs": 100, "batch_size": 64, "lr": 0.05,
            "momentum": 0.9, "weight_decay": 0.0, "schedule": "cosine", "grad_clip": 5.0,
            "split": "digits stratified 1000/797", "x_scale": "x/16"}


def _digits(name: str, kind: str, rate: float, description: str) -> Variant:
    return Variant(name, {"dataset": "digits", "noise": kind, "rate": rate}, description)


def _real(name: str, dataset: str, kind: str, rate: float | str, description: str) -> Variant:
    return Variant(name, {"dataset": dataset, "noise": kind, "rate": rate}, description,
                   default=False, queue="gpu")


VARIANTS = (
    _digits("clean", "none", 0.0, "no label noise"),
    _digits("sym-0.2", "symmetric", 0.2, "20% symmetric noise (APL exact-count convention)"),
    _digits("sym-0.4", "symmetric", 0.4, "40% symmetric noise (APL exact-count convention)"),
    _digits("sym-0.6", "symmetric", 0.6, "60% symmetric noise (APL exact-count convention)"),
    _digits("asym-0.2", "asymmetric", 0.2, "20% MNIST-style flips 7→1, 2→7, 5↔6, 3→8"),
    _digits("asym-0.4", "asymmetric", 0.4, "40% MNIST-style flips 7→1, 2→7, 5↔6, 3→8"),
    _digits("idn-0.4", "instance", 0.4, "40% instance-dependent noise (Xia et al.), x in [0,1]"),
    _real("mnist/sym-0.4", "mnist", "symmetric", 0.4, "MNIST, 40% symmetric (real data)"),
    _real("mnist/asym-0.4", "mnist", "asymmetric", 0.4, "MNIST, 40% MNIST-style flips"),
    _real("cifar10/sym-0.4", "cifar10", "symmetric", 0.4, "CIFAR-10, 40% symmetric"),
    _real("cifar10n/aggre", "cifar10", "cifar10n", "aggre", "CIFAR-10N aggregate labels (9%)"),
    _real("cifar10n/worst", "cifar10", "cifar10n", "worst", "CIFAR-10N worst labels (40%)"),
)

METRICS = (
    MetricSpec("test_acc", "clean test accuracy (last epoch)", percent=True, short="test acc",
               description="Top-1 accuracy on the clean test set after the last epoch."),
    MetricSpec("best_test_acc", "best-epoch test accuracy (peeks at test)", percent=True,
               short="best-epoch†",
               description="Secondary: the maximum over epochs; selecting it uses test labels."),
    MetricSpec("memorization", "memorized noisy labels", higher_is_better=False, percent=True,
               short="memorized",
               description="Share of noisy training samples predicted as their noisy label."),
    MetricSpec("correction", "corrected noisy labels", percent=True, short="corrected",
               description="Share of noisy training samples predicted as their clean label."),
    MetricSpec("noise_rate", "realized noise rate", higher_is_better=False, percent=True,
               short="noise",
               description="Share of training labels that differ from the clean labels."),
)

SUITE = Suite(
    name="noisy-labels",
    version="1.0",
    hook="classification_loss",
    description="Clean test accuracy after training on noisy labels.",
    headline="test_acc",
    metrics=METRICS,
    variants=VARIANTS,
    runner="suites.noisy_labels.protocol",
    reference="ce",
    protocol=PROTOCOL,
    # A 35-member digits run takes ~25 s on one core; the margins absorb a busy machine.
    resources=Resources(base_seconds=120, seconds_per_member=10),
)
