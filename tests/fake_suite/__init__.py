"""A small fake suite, registered only by the tests (``HARNESS_SUITES=tests.fake_suite``).

It is the worked example of docs/adding-a-suite.md and exercises every part of the suite
contract that the two real suites do not: a lower-is-better, non-percent headline
(RMSE), a suite-specific hook with its own smoke test and a second, post-hoc hook, a
curve against a non-epoch axis (RMSE against input noise σ), a reliability diagram, a
scatter of two non-percent metrics, a heatmap of its two errors, and a trainer using Adam.
Nothing outside this folder names it.

Task: linear regression y = x·w + ε on 8 features, with a share of the training targets
replaced by outliers (the variant); the test targets are clean.
"""

from __future__ import annotations

from harness.contract.suite import (
    EPOCH,
    Anchors,
    Axis,
    CurveSpec,
    HeatmapSpec,
    MetricSpec,
    ReliabilitySpec,
    Resources,
    ScatterSpec,
    Suite,
    Variant,
    VariantAxis,
)
from harness.objectives.spec import HookSpec

REGRESSION_LOSS = HookSpec(
    "regression_loss", ("pred", "target"),
    "(pred[B], target[B]) -> per-sample loss [B] or a scalar",
    smoke="tests.fake_suite.smoke:check_regression_loss",
    context=("progress",),
)
POSTHOC_SHIFT = HookSpec(
    "posthoc_shift", ("val_pred", "val_target", "test_pred"),
    "(val_pred[N], val_target[N], test_pred[M]) -> adjusted test predictions [M]",
    smoke="tests.fake_suite.smoke:check_posthoc_shift",
    context=(),
)

SETTINGS = {"epochs": 20, "batch_size": 32, "optimizer": "adam", "lr": 0.1,
            "lr_schedule": "constant", "grad_clip": None, "features": 8, "train": 192,
            "val": 64, "test": 256, "noise_grid": [0.0, 0.5, 1.0], "bins": 5}


def _variant(name: str, outliers: float, default: bool = True) -> Variant:
    return Variant(name, {"outliers": outliers}, f"{outliers:.0%} of training targets are "
                   f"outliers", default=default)


SUITE = Suite(
    name="fake-regression",
    version="0.1",
    description="RMSE of a linear regression trained on targets with outliers.",
    hooks=("regression_loss", "posthoc_shift"),
    hook_specs=(REGRESSION_LOSS, POSTHOC_SHIFT),
    headline="rmse",
    metrics=(
        MetricSpec("rmse", "test RMSE", better="lower", decimals=3, short="RMSE",
                   description="Root mean squared error on the clean test targets."),
        MetricSpec("mae", "test mean absolute error", better="lower", decimals=3, short="MAE"),
        MetricSpec("sign_acc", "sign accuracy", unit="percent", decimals=1, short="sign"),
        MetricSpec("bias", "mean residual", better="neither", decimals=3, short="bias"),
    ),
    anchors={"rmse": Anchors(worst=3.0, best=0.0)},
    variants=(_variant("clean", 0.0), _variant("out-0.2", 0.2), _variant("out-0.4", 0.4),
              _variant("out-0.6", 0.6, default=False)),
    pipeline="tests.fake_suite.pipeline:FakeRegression",
    baselines=("mse", "huber"),
    reference="mse",
    settings=SETTINGS,
    curves=(
        CurveSpec("train_loss", "training loss", EPOCH),
        CurveSpec("noise_grid", "input noise σ", Axis("grid point"), drawn=False),
        CurveSpec("rmse_vs_noise", "test RMSE", Axis("input noise σ"), decimals=3,
                  x_values="noise_grid"),
        CurveSpec("bin_confidence", "mean P(y > 0) in the bin", Axis("bin"), drawn=False),
        CurveSpec("bin_accuracy", "share of y > 0 in the bin", Axis("bin"), drawn=False),
        CurveSpec("bin_count", "samples in the bin", Axis("bin"), drawn=False),
    ),
    scatters=(ScatterSpec(x="mae", y="rmse"),),
    reliability=ReliabilitySpec("bin_confidence", "bin_accuracy", "bin_count",
                                label="reliability of P(y > 0) = sigmoid(prediction)"),
    variant_axis=VariantAxis("outliers", "outlier share"),
    train_info={"posthoc": bool},
    resources=Resources(base_seconds=60, seconds_per_member=5),
    heatmap=HeatmapSpec(("rmse", "mae"), "test errors"),
)
