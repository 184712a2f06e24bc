"""prepare → train → judge for the fake regression suite (the worked example of
docs/adding-a-suite.md): a linear model per seed, trained seed-batched with Adam on
targets with outliers; an optional post-hoc hook adjusts the test predictions; the judge
recomputes everything from the returned weights."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from harness.contract import seeding
from harness.contract.judging import cell_results
from harness.contract.outputs import check_array, diverged_in, diverged_out, params_in, params_out
from harness.contract.pipeline import InvalidOutput, Job, Pipeline, TrainOutput
from harness.contract.reliability import reliability_curves
from harness.contract.suite import CellResult, Suite, Variant
from harness.objectives.loading import LoadedObjective
from harness.train import Shuffled, TrainConfig, each_member, stacked_init, train_members

DATASET_SEED = 20261201


class FakeRegression(Pipeline):
    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        data = _dataset(suite.settings)
        members = [(v.name, s) for v in variants for s in seeds]
        targets = np.stack([_with_outliers(data["y_train"], v, s) for v in variants
                            for s in seeds])
        return [Job(members, {"x_train": data["x_train"], "targets": targets,
                              "x_val": data["x_val"], "y_val": data["y_val"],
                              "x_test": data["x_test"]},
                    {"seeds": [s for _, s in members]}, private=data)]

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        seeds = list(plan["seeds"])
        config = TrainConfig.from_settings(suite.settings)
        model = nn.Linear(inputs["x_train"].shape[1], 1)
        hook = objective.bind("regression_loss") if "regression_loss" in objective.hooks \
            else _mse  # a post-hoc-only objective trains as the reference does

        def member_loss(p, batch, state, progress_):
            pred = functional_call(model, p, (batch["x"],)).squeeze(-1)
            return hook(pred, batch["y"], progress=progress_)

        trained = train_members(
            member_loss, stacked_init(model, seeds),
            Shuffled(seeds, config.batch_size, config.epochs,
                     shared={"x": torch.from_numpy(inputs["x_train"])},
                     own={"y": torch.from_numpy(inputs["targets"])}),
            config, mode=mode, device=device, cells_done=progress)
        arrays = params_out(trained.params)
        arrays.update({"loss_curve": trained.loss_curve.numpy(),
                       "diverged_step": diverged_out(trained.diverged_step)})
        posthoc = "posthoc_shift" in objective.hooks
        if posthoc:
            shift = objective.bind("posthoc_shift")
            val = _predict(trained.params, inputs["x_val"])
            test = _predict(trained.params, inputs["x_test"])
            y_val = torch.from_numpy(inputs["y_val"])
            arrays["test_adjusted"] = each_member(
                shift, val, y_val.expand(len(seeds), -1), test).numpy()
        return TrainOutput(arrays, {"mode": trained.mode, "wall_time": trained.wall_time,
                                    "fallback_reason": trained.fallback_reason,
                                    "posthoc": posthoc})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        data, settings = job.private, suite.settings
        m, epochs = len(job.members), settings["epochs"]
        steps = -(-settings["train"] // settings["batch_size"]) * epochs
        diverged = diverged_in(output.arrays, m, steps)
        alive = diverged < 0
        features = data["x_train"].shape[1]
        params = params_in(output.arrays, [("weight", (1, features)), ("bias", (1,))], m,
                           alive)
        loss = check_array(output.arrays, "loss_curve", (m, epochs), "f")
        test = _predict(params, data["x_test"]).numpy()
        if not isinstance(output.info.get("posthoc"), bool):
            raise InvalidOutput("the trainer did not say whether it adjusted predictions")
        adjusted = test
        if output.info["posthoc"]:
            adjusted = check_array(output.arrays, "test_adjusted", test.shape, "f")
            if not np.isfinite(adjusted[alive]).all():
                raise InvalidOutput("test_adjusted is not finite")
        y = data["y_test"]
        grid = [float(s) for s in settings["noise_grid"]]
        noise = seeding.rng(0, "judge-noise").standard_normal(data["x_test"].shape)

        def member(i: int) -> tuple[dict[str, float], dict[str, list[float]]]:
            r = adjusted[i] - y
            one = {k: v[i:i + 1] for k, v in params.items()}
            curves = {"noise_grid": grid, "rmse_vs_noise": [
                float(np.sqrt(np.mean((_predict(one, (data["x_test"] + s * noise).astype(
                    np.float32)).numpy()[0] - y) ** 2))) for s in grid]}
            curves.update(_reliability(suite, adjusted[i], y, settings["bins"]))
            metrics = {"rmse": float(np.sqrt(np.mean(r ** 2))), "mae": float(np.abs(r).mean()),
                       "sign_acc": float(((adjusted[i] > 0) == (y > 0)).mean()),
                       "bias": float(r.mean())}
            return metrics, curves

        return cell_results(job, output, member, diverged=diverged,
                            training=lambda i: {"train_loss": loss[i].tolist()},
                            steps_per_point=steps // epochs,
                            info={"posthoc": output.info["posthoc"]})


def _mse(pred: torch.Tensor, target: torch.Tensor, **context: Any) -> torch.Tensor:
    return (pred - target) ** 2


def _predict(params: Mapping[str, torch.Tensor], x: np.ndarray) -> torch.Tensor:
    """[M, N] predictions of stacked linear models."""
    with torch.no_grad():
        return torch.einsum("nf,mf->mn", torch.from_numpy(x), params["weight"][:, 0]) \
            + params["bias"]


def _reliability(suite: Suite, pred: np.ndarray, y: np.ndarray,
                 bins: int) -> dict[str, list[float]]:
    """Equal-width bins of P(y > 0) = sigmoid(prediction): mean confidence, share of y > 0,
    samples (an empty bin has no confidence or accuracy)."""
    p = 1.0 / (1.0 + np.exp(-pred))
    which = np.minimum((p * bins).astype(int), bins - 1)
    return reliability_curves(suite.reliability, p, (y > 0).astype(float), which, bins)


def _dataset(settings: Mapping[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(DATASET_SEED)
    f = settings["features"]
    w = rng.normal(size=f)

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.normal(size=(n, f)).astype(np.float32)
        return x, (x @ w + 0.3 * rng.normal(size=n)).astype(np.float32)

    x_train, y_train = split(settings["train"])
    x_val, y_val = split(settings["val"])
    x_test, y_test = split(settings["test"])
    return {"x_train": x_train, "y_train": y_train, "x_val": x_val, "y_val": y_val,
            "x_test": x_test, "y_test": y_test}


def _with_outliers(y: np.ndarray, variant: Variant, seed: int) -> np.ndarray:
    """A share of the targets replaced by large positive values, from (variant, seed) only."""
    rng = seeding.rng(seed, seeding.NOISE, variant.name)
    out = y.copy()
    chosen = rng.choice(len(y), size=int(variant.config["outliers"] * len(y)), replace=False)
    out[chosen] = (8.0 + 4.0 * rng.normal(size=len(chosen))).astype(np.float32)
    return out
