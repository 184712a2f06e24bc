"""Train inside, judge outside: certified training, then a trusted evaluation.

Training: every seed of one variant trains as one seed-batched ``train_members`` run,
with the member loss of :mod:`suites.certified.training` (the objective's
``certified_loss``, or its ``classification_loss`` lifted with the IBP mixing; the
suite's reference ``ce`` trains naturally). The objective sees training batches, the
logits, worst-case logits from bounds and whatever context it asks for by name; never
test data or metric code.

Judging: :mod:`suites.certified.evaluation` on the test set, from the returned weights
only: clean, PGD, IBP- and CROWN-verified accuracy and the headline verified accuracy (a
sample counts if either bound verifies it), bound gaps, verified accuracy over an ε grid,
with a soundness check on every evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from harness.contract import seeding
from harness.contract.judging import Failure, cell_results
from harness.contract.outputs import check_array, diverged_in, diverged_out, params_in, params_out
from harness.contract.pipeline import Job, Pipeline, TrainOutput
from harness.contract.suite import CellResult, Suite, Variant
from harness.objectives.loading import LoadedObjective
from harness.train import (
    ObjectiveRuntimeError,
    Shuffled,
    per_member_of,
    predict,
    stacked_init,
    train_members,
)
from suites.certified.attack import PGDConfig
from suites.certified.data import Box, Dataset, load_dataset
from suites.certified.evaluation import (
    SoundnessError,
    evaluate,
    final_plain_params,
    judge_member,
)
from suites.certified.training import (
    config_of,
    member_loss,
    model_for,
    reported_training,
    schedule_of,
    training_for,
)

log = logging.getLogger(__name__)


class Certified(Pipeline):
    member_plan = ("seeds",)  # a tuned run's trials repeat them

    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """One job per variant: training data and unlabeled test inputs; test labels stay
        here. A tuned run's search (``validation_share`` in the settings) trains on the
        training set less a validation split and is judged on that split, as the test set
        is judged otherwise."""
        datasets: dict[str, Dataset] = {}
        jobs = []
        share = suite.settings.get("validation_share")
        for variant in variants:
            name = variant.config["dataset"]
            if name not in datasets:
                datasets[name] = load_dataset(name, data_root, download)
            data = datasets[name]
            if share:
                kept, held = seeding.validation_rows(len(data.y_train), share)
                data = replace(data, x_train=data.x_train[kept], y_train=data.y_train[kept],
                               x_test=data.x_train[held], y_test=data.y_train[held])
            jobs.append(Job([(variant.name, s) for s in seeds],
                            {"x_train": data.x_train, "y_train": data.y_train,
                             "x_eval": data.x_test},
                            {"variant": variant.name, "seeds": list(seeds),
                             "num_classes": data.num_classes,
                             "mean": list(data.mean) if data.mean else None,
                             "std": list(data.std) if data.std else None},
                            private=data))
        return jobs

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        """Train one variant's members; stacked weights and curves out."""
        try:
            training = training_for(objective, suite)
        except ValueError as exc:
            raise ObjectiveRuntimeError(str(exc)) from exc
        variant = suite.variant(plan["variant"])
        seeds = list(plan["seeds"])
        data = Dataset(inputs["x_train"], inputs["y_train"], inputs["x_eval"],
                       np.zeros(0, dtype=np.int64), plan["num_classes"],
                       tuple(plan["mean"]) if plan["mean"] else None,
                       tuple(plan["std"]) if plan["std"] else None)
        config, schedule = config_of(suite, variant), schedule_of(suite, variant)
        net = model_for(data, training)
        init = stacked_init(net.train, seeds)  # on the CPU: the same init whatever the device
        net.train.to(device)
        net.plain.to(device)
        loss = member_loss(net, objective, training, schedule, Box.of(data, device),
                           train_pgd_steps=suite.settings["train_pgd_steps"])
        labels = torch.from_numpy(data.y_train).expand(len(seeds), -1).contiguous()
        x_eval = torch.from_numpy(data.x_test).to(device)

        trained = train_members(
            loss, init,
            Shuffled(seeds, config.batch_size, config.epochs,
                     shared={"x": torch.from_numpy(data.x_train)}, own={"y": labels}),
            config, mode=mode, device=device, cells_done=progress,
            evaluate=lambda p: predict(net.train, p, x_eval), per_member=per_member_of(plan))
        arrays = params_out(trained.params)
        arrays.update({"eval_predictions": trained.evaluations.numpy(),
                       "loss_curve": trained.loss_curve.numpy(),
                       "grad_norm_curve": trained.grad_norm_curve.numpy(),
                       "diverged_step": diverged_out(trained.diverged_step)})
        return TrainOutput(arrays, {
            "mode": trained.mode, "fallback_reason": trained.fallback_reason,
            "wall_time": trained.wall_time,
            "training": {"kind": training.kind, "hook": training.hook,
                         "batch_norm": training.batch_norm, "init": training.init}})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        """The trusted evaluation of the returned weights, after checking every array."""
        data: Dataset = job.private
        outputs = output.arrays
        variant = suite.variant(job.plan["variant"])
        seeds = job.plan["seeds"]
        training = reported_training(output.info)
        config, schedule = config_of(suite, variant), schedule_of(suite, variant)
        net = model_for(data, training)
        m, epochs = len(seeds), config.epochs
        steps_per_epoch = -(-len(data.y_train) // config.batch_size)
        diverged = diverged_in(outputs, m, steps_per_epoch * epochs)
        alive_mask = diverged < 0
        alive = [i for i in range(m) if alive_mask[i]]
        shapes = [(name, tuple(p.shape)) for name, p in net.train.named_parameters()]
        params = params_in(outputs, shapes, m, alive_mask)
        eval_pred = check_array(outputs, "eval_predictions", (epochs, m, len(data.y_test)),
                                "iu", low=0, high=data.num_classes - 1)
        loss_curve = check_array(outputs, "loss_curve", (m, epochs), "f")
        grad_curve = check_array(outputs, "grad_norm_curve", (m, epochs), "f")

        params = {k: v.to(device) for k, v in params.items()}
        plain = final_plain_params(net, params, torch.from_numpy(data.x_train).to(device))
        generators = [torch.Generator().manual_seed(
            seeding.stream_seed(s, "attack", variant.name)) for s in seeds]
        p = suite.settings
        grid = [g * variant.config["eps"] for g in p["eps_grid"]]
        row = {i: r for r, i in enumerate(alive)}  # member -> its row in the evaluation
        evaluation = None
        if alive:  # a diverged member's frozen weights are not evaluated
            evaluation = evaluate(net.plain, {k: v[alive] for k, v in plain.items()},
                                  torch.from_numpy(data.x_test).to(device),
                                  torch.from_numpy(data.y_test).to(device),
                                  Box.of(data, device), variant.config["eps"],
                                  [generators[i] for i in alive], PGDConfig(**p["pgd"]),
                                  grid=grid,
                                  chunk=p["eval_chunk"] if data.x_test.ndim == 2 else 16)
        eval_time = evaluation.wall_time if evaluation is not None else 0.0
        train_time = float(output.info.get("wall_time") or 0.0)
        total_steps = steps_per_epoch * epochs
        eps_curve = [schedule.eps((e + 1) * steps_per_epoch / total_steps)
                     for e in range(epochs)]
        judged_info = {"training": training.kind, "batch_norm": training.batch_norm,
                       "init": training.init, "eps_test": variant.config["eps"],
                       "eps_train": schedule.eps_max, "train_time": train_time / m,
                       "eval_time": eval_time / m}

        def member(i: int) -> tuple[dict[str, float], dict[str, list[float]]] | Failure:
            try:
                return judge_member(evaluation, row[i])
            except SoundnessError as exc:
                log.error("harness bug on %s seed %s: %s", variant.name, seeds[i], exc)
                return Failure(f"harness bug: soundness violated: {exc}", "infrastructure",
                               curves=True)

        return cell_results(
            job, output, member, diverged=diverged,
            training=lambda i: {
                "train_loss": loss_curve[i].tolist(), "grad_norm": grad_curve[i].tolist(),
                "clean_acc": (eval_pred[:, i] == data.y_test[None]).mean(1).tolist(),
                "eps_schedule": eps_curve},
            steps_per_point=steps_per_epoch, info=judged_info, seconds=train_time + eval_time)
