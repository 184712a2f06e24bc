"""prepare → train → judge for the calibration suite.

All seeds of one data set train together as members of one seed-batched run. A
training objective trains with its ``classification_loss``; an objective with only a
``posthoc_calibration`` trains as the reference does (CE: the same init and data order,
so the same weights as ``ce``: trained once per run, :mod:`harness.contract.memo`) and its
calibrator then maps each member's validation and test logits to test probabilities. The
judge checks the returned weights, recomputes a training objective's logits from them or
checks a calibrator's probabilities, and computes every metric.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from harness.contract import seeding
from harness.contract.judging import Failure, cell_results
from harness.contract.memo import once
from harness.contract.outputs import check_array, diverged_in, diverged_out, params_in, params_out
from harness.contract.pipeline import InvalidOutput, Job, Pipeline, TrainOutput
from harness.contract.reliability import reliability_curves
from harness.contract.suite import CellResult, Suite, Variant
from harness.models.mlp import mlp
from harness.objectives.loading import LoadedObjective, load_objective
from harness.train import (
    Shuffled,
    TrainConfig,
    TrainResult,
    classification_member_loss,
    each_member,
    logits,
    per_member_of,
    stacked_init,
    train_members,
)
from suites.calibration import BINS, DROPOUT, NOISE, SUITE, data
from suites.calibration.probabilities import problem

# suites.calibration.metrics (scipy) is imported where the judge needs it, never at import: the
# sandbox's fork server imports this module, and its children must hold no scipy/sklearn.
LOSS, POSTHOC = "classification_loss", "posthoc_calibration"
SHIFTS = [("noise", s) for s in NOISE] + [("dropout", s) for s in DROPOUT]


class Calibration(Pipeline):
    member_inputs, member_plan = ("labels",), ("seeds",)  # a tuned run's trials repeat them

    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """One job per data set. The trainer sees the training set, the validation set
        (a calibrator is fitted on it) and the test inputs, clean and shifted; the test
        labels stay with the judge."""
        jobs = []
        for variant in variants:
            d = data.load(variant.config["dataset"], data_root, download)
            if suite.settings.get("validation_share"):
                # a tuned run's search: judged on the validation split, never the test set
                d = dataclasses.replace(d, x_test=d.x_val, y_test=d.y_val)
            tests = np.stack([d.x_test] + [data.shifted(d, k, s) for k, s in SHIFTS])
            members = [(variant.name, s) for s in seeds]
            jobs.append(Job(members,
                            {"x_train": d.x_train,
                             "labels": np.tile(d.y_train, (len(seeds), 1)),
                             "x_val": d.x_val, "y_val": d.y_val, "x_test": tests},
                            {"seeds": list(seeds), "num_classes": d.num_classes},
                            private=d))
        return jobs

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        """Train every member; with a calibrator, its test probabilities too. Nothing judged."""
        seeds, k = list(plan["seeds"]), int(plan["num_classes"])
        config = TrainConfig.from_settings(suite.settings)
        x_train = torch.from_numpy(np.ascontiguousarray(inputs["x_train"]))
        model = model_for(x_train.shape[1:], k)
        # A calibrator's objective trains exactly as the suite's reference does.
        trains = objective if LOSS in objective.hooks else load_objective(suite.reference)
        loss = trains.bind(LOSS)
        init = stacked_init(model, seeds)  # on the CPU: the same init whatever the device
        model = model.to(device)
        labels = np.ascontiguousarray(inputs["labels"])
        fitted = []

        def fit() -> TrainResult:
            fitted.append(True)
            return train_members(
                classification_member_loss(model, loss), init,
                Shuffled(seeds, config.batch_size, config.epochs, shared={"x": x_train},
                         own={"y": torch.from_numpy(labels)}),
                config, mode=mode, device=device, cells_done=progress,
                per_member=per_member)

        per_member = per_member_of(plan)
        if trains.origin != "builtin" or per_member is not None:
            trained = fit()
        else:  # the reference's group and every calibrator's train the same weights: once
            trained = once(_training_key(suite, trains, seeds, inputs["x_train"], labels, mode,
                                         device), fit)
            if not fitted and progress is not None:
                progress(float(len(seeds)))
        arrays = params_out(trained.params)
        arrays.update({"loss_curve": trained.loss_curve.numpy(),
                       "diverged_step": diverged_out(trained.diverged_step)})
        posthoc = POSTHOC in objective.hooks
        if posthoc:
            params = {n: p.detach() for n, p in trained.params.items()}
            val = _logits(model, params, inputs["x_val"])
            tests = inputs["x_test"]
            test = _logits(model, params, tests.reshape(-1, *tests.shape[2:]))
            y_val = torch.from_numpy(inputs["y_val"]).expand(len(seeds), -1)
            # Clean and shifted test rows in one call: a calibrator maps rows one by one.
            probs = each_member(objective.bind(POSTHOC), val, y_val, test)
            arrays["test_probs"] = probs.detach().cpu().numpy() if isinstance(
                probs, torch.Tensor) else np.asarray(probs)
        return TrainOutput(arrays, {"mode": trained.mode, "wall_time": trained.wall_time,
                                    "fallback_reason": trained.fallback_reason,
                                    "posthoc": posthoc})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        from suites.calibration import metrics as cal
        d: data.Splits = job.private
        config = TrainConfig.from_settings(suite.settings)
        m, k, epochs = len(job.members), d.num_classes, config.epochs
        steps_per_epoch = -(-len(d.y_train) // config.batch_size)
        diverged = diverged_in(output.arrays, m, steps_per_epoch * epochs)
        alive = diverged < 0
        loss = check_array(output.arrays, "loss_curve", (m, epochs), "f")
        model = model_for(d.x_train.shape[1:], k)
        shapes = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
        model = model.to(device)
        params = {n: p.to(device) for n, p in params_in(output.arrays, shapes, m, alive).items()}
        tests = job.inputs["x_test"]  # [1 + shifts, N, ...], what the trainer was given
        rows, n_test = tests.shape[0] * tests.shape[1], tests.shape[1]
        posthoc = output.info.get("posthoc")
        if not isinstance(posthoc, bool):
            raise InvalidOutput("the trainer did not say whether it calibrated post hoc")
        probs = val = test = None
        if posthoc:  # judged on the calibrator's probabilities: no logits needed here
            probs = check_array(output.arrays, "test_probs", (m, rows, k), "f")
        else:
            val = _logits(model, params, d.x_val).numpy()
            test = _logits(model, params, tests.reshape(rows, *tests.shape[2:])).numpy()

        def member(i: int) -> tuple[dict[str, float], dict[str, list[float]]] | Failure:
            if probs is not None:
                why = problem(probs[i], (rows, k))
                if why:
                    return Failure(f"{POSTHOC} {why}")
                scored = probs[i].astype(np.float64)
            else:
                scored = cal.softmax(test[i])
            return judge_member(scored.reshape(-1, n_test, k), d.y_test,
                                None if posthoc else (val[i], d.y_val, test[i]))

        return cell_results(job, output, member, diverged=diverged,
                            training=lambda i: {"train_loss": loss[i].tolist()},
                            steps_per_point=steps_per_epoch,
                            info={"track": "post-hoc" if posthoc else "training"})


def judge_member(probs: np.ndarray, labels: np.ndarray,
                 logits: tuple[np.ndarray, np.ndarray, np.ndarray] | None
                 ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Metrics and curves of one member: ``probs [1 + shifts, N, K]`` (clean test first);
    ``logits`` = (validation logits, validation labels, test logits [(1 + shifts)·N, K])
    for a training objective, whose metrics after temperature scaling are added."""
    from suites.calibration import metrics as cal
    clean = probs[0]
    metrics = cal.metrics(clean, labels)
    shifted = [cal.ece(p, labels) for p in probs[1:]]
    metrics["ece_shift"] = float(np.mean(shifted))
    metrics["accuracy_shift"] = float(np.mean([cal.accuracy(p, labels) for p in probs[1:]]))
    if logits is not None:
        val, y_val, test = logits
        t = cal.fit_temperature(val, y_val)
        metrics["temperature"] = t
        scaled = cal.softmax(test[:len(labels)], t)
        metrics.update({f"{name}_ts": value for name, value in cal.metrics(scaled, labels).items()
                        if name != "accuracy"})
    curves = {"noise_levels": list(NOISE), "ece_vs_noise": shifted[:len(NOISE)],
              "dropout_levels": list(DROPOUT), "ece_vs_dropout": shifted[len(NOISE):]}
    curves.update(reliability(clean, labels))
    return metrics, curves


def reliability(probs: np.ndarray, labels: np.ndarray,
                bins: int = BINS) -> dict[str, list[float]]:
    """Per equal-width bin of the top-label confidence: mean confidence, accuracy and count
    (an empty bin has no confidence or accuracy: NaN, stored as null)."""
    from suites.calibration import metrics as cal
    conf, hits = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(float)
    return reliability_curves(SUITE.reliability, conf, hits, cal.equal_width_bins(conf, bins),
                              bins)


def _training_key(suite: Suite, trains: LoadedObjective, seeds: list[int], x_train: np.ndarray,
                  labels: np.ndarray, mode: str, device: str) -> str:
    """What a built-in's training here depends on: the suite version (settings, model), the
    objective's code and hyperparameters, the members' seeds and the data, byte for byte."""
    data = hashlib.sha256(np.ascontiguousarray(x_train).tobytes())
    data.update(labels.tobytes())
    return json.dumps(["calibration-training", suite.name, suite.version, trains.version_key,
                       seeds, data.hexdigest(), mode, device, sorted(suite.settings.items())],
                      default=str)


def model_for(input_shape: tuple[int, ...], num_classes: int) -> torch.nn.Module:
    """The suite's MLP D-256-256-K for feature vectors; a CIFAR ResNet-20 for images."""
    from harness.models.resnet import cifar_resnet

    with seeding.torch_global():  # building draws: from nobody else's stream
        if len(input_shape) == 1:
            return mlp((input_shape[0], 256, 256, num_classes))
        return cifar_resnet(input_shape[0], num_classes)


def _logits(model: torch.nn.Module, params: Mapping[str, torch.Tensor],
            x: np.ndarray) -> torch.Tensor:
    """[M, N, K] logits of every member on the shared inputs ``x``."""
    return logits(model, params, torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
