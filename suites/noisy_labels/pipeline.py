"""Train inside, judge outside: noisy labels in, weights out, metrics computed here.

All (variant, seed) cells of one dataset train together as members of one seed-batched
run. The objective only ever sees training inputs with their noisy labels; clean
training labels and test labels stay with the judge below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.contract import heldout, seeding
from harness.contract.judging import cell_results
from harness.contract.outputs import check_array, diverged_in, diverged_out, params_in, params_out
from harness.contract.pipeline import InvalidOutput, Job, Pipeline, TrainOutput
from harness.contract.suite import CellResult, Suite, Variant
from harness.data import data_root
from harness.models.mlp import mlp
from harness.objectives.loading import LoadedObjective
from harness.train import (
    Shuffled,
    TrainConfig,
    classification_member_loss,
    per_member_of,
    predict,
    stacked_init,
    train_members,
)
from suites.noisy_labels.metrics import judge_member

HOOK = "classification_loss"


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray  # clean: never handed to the objective
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


class NoisyLabels(Pipeline):
    member_inputs, member_plan = ("labels",), ("seeds",)  # a tuned run's trials repeat them

    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """One job per dataset: training inputs, each member's noisy labels, unlabeled test
        inputs."""
        by_dataset: dict[tuple[str, int | None], list[Variant]] = {}
        for v in variants:  # a held-out variant's split is its own: a job of its own
            split = heldout.draw(suite.name, v.name, "split") if v.held_out_of else None
            by_dataset.setdefault((v.config["dataset"], split), []).append(v)
        jobs = []
        share = suite.settings.get("validation_share")
        for (name, split), group in by_dataset.items():
            data = load_dataset(name, data_root, download, split=split)
            if share:  # a tuned run's search: one job per variant (its own validation labels)
                jobs += [self._searching(data, v, seeds, share, data_root,
                                         _noise_salt(suite, v)) for v in group]
                continue
            members = [(v.name, s) for v in group for s in seeds]
            noisy = np.stack([noisy_labels(data, v, s, data_root, salt=_noise_salt(suite, v))
                              for v in group for s in seeds])
            jobs.append(Job(members,
                            {"x_train": data.x_train, "labels": noisy, "x_eval": data.x_test},
                            {"seeds": [s for _, s in members], "num_classes": data.num_classes},
                            private=data))
        return jobs

    def _searching(self, data: Dataset, variant: Variant, seeds: list[int],
                   share: float, root: str | None, salt: str) -> Job:
        """The job of a tuned run's search: trained on the training set less a validation
        split, judged on that split against its noisy labels (one fixed draw of the
        variant's noise: a practitioner's validation set is as noisy as the rest). Every
        label is drawn on the whole training set, as the default run draws it, then split:
        a row's noisy label is the same in the search as in the final run (human labels
        such as CIFAR-10N's stay aligned with their rows)."""
        kept, held = seeding.validation_rows(len(data.y_train), share)
        noisy = np.stack([noisy_labels(data, variant, s, root, salt=salt)[kept]
                          for s in seeds])
        held_labels = noisy_labels(data, variant, 0, root,
                                   salt=f"{salt}validation")[held]
        part = Dataset(data.x_train[kept], data.y_train[kept], data.x_train[held],
                       held_labels, data.num_classes)
        return Job([(variant.name, s) for s in seeds],
                   {"x_train": part.x_train, "labels": noisy, "x_eval": part.x_test},
                   {"seeds": list(seeds), "num_classes": part.num_classes}, private=part)

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        """Train every member on its noisy labels; weights and curves out, nothing judged."""
        x_train = torch.from_numpy(inputs["x_train"])
        labels = torch.from_numpy(inputs["labels"])
        seeds = list(plan["seeds"])
        config = TrainConfig.from_settings(suite.settings)
        model = _model(x_train, plan["num_classes"])
        init = stacked_init(model, seeds)  # on the CPU: the same init whatever the device
        model = model.to(device)
        size = 4 * config.epochs * len(seeds) * sum(p.numel() for p in model.parameters())
        keep = size <= plan.get("epoch_weights_budget", 0)  # the sandbox asks, within its quota
        # With every epoch's weights the judge predicts each epoch itself: no need to here.
        x_eval = torch.from_numpy(inputs["x_eval"]).to(device)
        trained = train_members(
            classification_member_loss(model, objective.bind(HOOK)),
            init,
            Shuffled(seeds, config.batch_size, config.epochs, shared={"x": x_train},
                     own={"y": labels}),
            config, mode=mode, device=device,
            evaluate=None if keep else (lambda p: predict(model, p, x_eval)),
            cells_done=progress, keep_epoch_params=keep, per_member=per_member_of(plan))
        arrays = params_out(trained.params)
        if keep:
            arrays.update(params_out(trained.epoch_params, "epoch_param:"))
        else:
            arrays["eval_predictions"] = trained.evaluations.numpy()
        arrays.update({"loss_curve": trained.loss_curve.numpy(),
                       "grad_norm_curve": trained.grad_norm_curve.numpy(),
                       "diverged_step": diverged_out(trained.diverged_step)})
        return TrainOutput(arrays, {"mode": trained.mode,
                                    "fallback_reason": trained.fallback_reason,
                                    "wall_time": trained.wall_time})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        """Every member's metrics from what the trainer returned, after checking all of it.

        The final test and training predictions are always recomputed here from the
        returned weights. With every epoch's weights (what the sandbox asks for), so is each
        epoch's test accuracy (the curve and the best-epoch metric); otherwise those come
        from the trainer's per-epoch predictions, whose last epoch must agree with the
        weights.
        """
        data: Dataset = job.private
        outputs = output.arrays
        config = TrainConfig.from_settings(suite.settings)
        m, epochs = len(job.members), config.epochs
        loss = check_array(outputs, "loss_curve", (m, epochs), "f")
        grad = check_array(outputs, "grad_norm_curve", (m, epochs), "f")
        steps_per_epoch = -(-len(data.y_train) // config.batch_size)
        diverged = diverged_in(outputs, m, steps_per_epoch * epochs)
        alive = diverged < 0
        model = model_for(data)
        shapes = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
        params = params_in(outputs, shapes, m, alive)
        with torch.no_grad():
            test_pred = predict(model, params, torch.from_numpy(data.x_test)).numpy()
            train_pred = predict(model, params, torch.from_numpy(data.x_train)).numpy()
        verified = any(k.startswith("epoch_param:") for k in outputs)
        if verified:  # every epoch's test predictions from that epoch's weights
            eval_pred = _epoch_predictions(model, data, outputs, shapes, m, epochs, alive)
        else:
            eval_pred = check_array(outputs, "eval_predictions", (epochs, m, len(data.y_test)),
                                    "iu", low=0, high=data.num_classes - 1).astype(np.int64)
            agree = (eval_pred[-1][alive] == test_pred[alive]).mean() if alive.any() else 1.0
            if agree < 0.99:
                raise InvalidOutput(f"the returned last-epoch predictions do not come from "
                                    f"the returned weights (they agree on {100 * agree:.1f}% "
                                    f"of samples)")
        eval_pred[-1] = test_pred
        noisy = job.inputs["labels"]
        scored = [judge_member(data, noisy[i], eval_pred[:, i], train_pred[i]) for i in range(m)]
        return cell_results(
            job, output, lambda i: (scored[i][0], {}), diverged=diverged,
            training=lambda i: {**scored[i][1], "train_loss": loss[i].tolist(),
                                "grad_norm": grad[i].tolist()},
            steps_per_point=steps_per_epoch,
            # a diverged member's noise rate is still its labels'; its accuracies are not
            kept=lambda i: {"noise_rate": scored[i][0]["noise_rate"]},
            info={"epochs_verified": verified})


def _epoch_predictions(model: torch.nn.Module, data: Dataset, outputs: Mapping[str, Any],
                       shapes: list[tuple[str, tuple[int, ...]]], m: int, epochs: int,
                       alive: np.ndarray) -> np.ndarray:
    """[E, M, N_test] predictions of each epoch's returned weights; the last epoch's weights
    must be exactly the final ones."""
    stacked = {}
    for name, shape in shapes:
        a = check_array(outputs, f"epoch_param:{name}", (epochs, m, *shape), "f")
        if alive.any() and not np.isfinite(a[:, alive]).all():
            raise InvalidOutput(f"epoch_param:{name} is not finite for a member that did "
                                f"not diverge")
        if not np.array_equal(a[-1], outputs[f"param:{name}"], equal_nan=True):
            raise InvalidOutput(f"epoch_param:{name}: the last epoch's weights are not the "
                                f"returned final weights")
        stacked[name] = torch.from_numpy(np.array(a, dtype=np.float32))  # own, writable copy
    x = torch.from_numpy(data.x_test)
    with torch.no_grad():  # one epoch at a time: bigger batches are slower on a CPU
        return np.stack([predict(model, {k: v[e] for k, v in stacked.items()}, x).numpy()
                         for e in range(epochs)])


def noisy_labels(data: Dataset, variant: Variant, seed: int,
                 root: str | None = None, *, salt: str = "") -> np.ndarray:
    """The training labels a member sees: drawn from (variant, seed) only, and ``salt`` (a
    held-out variant's secret draw)."""
    from suites.noisy_labels import noise  # scipy: the trainer (sandbox) never needs it

    kind, rate = variant.config["noise"], variant.config["rate"]
    rng = seeding.rng(seed, seeding.NOISE, variant.name, *([salt] if salt else []))
    y, k = data.y_train, data.num_classes
    if kind == "none":
        return y.copy()
    if kind == "symmetric":
        return noise.symmetric_exact(y, rate, k, rng)
    if kind == "asymmetric":
        return noise.asymmetric(y, rate, noise.MNIST_ASYMMETRIC, rng)
    if kind == "instance":
        return noise.instance_dependent(data.x_train.reshape(len(y), -1), y, rate, k, rng)
    if kind == "cifar10n":
        from harness.data.real import load_cifar10n_labels

        path = Path(data_root(root)) / "CIFAR-10_human.pt"
        return load_cifar10n_labels(path, rate, expected_len=len(y)).astype(np.int64)
    raise ValueError(f"unknown noise kind {kind!r}")


def _noise_salt(suite: Suite, variant: Variant) -> str:
    return str(heldout.draw(suite.name, variant.name, "noise")) if variant.held_out_of else ""


def load_dataset(name: str, root: str | None, download: bool, *,
                 split: int | None = None) -> Dataset:
    """``split``: a held-out variant's draw of the train/test split (digits only)."""
    if name == "digits":
        from harness.data.digits import digits_split

        x_tr, y_tr, x_te, y_te = digits_split(split)
        return Dataset(x_tr, y_tr, x_te, y_te, 10)
    if split is not None:
        raise ValueError(f"a held-out split of {name} is not supported (digits only)")
    from harness.data import real

    if name == "mnist":
        ds = real.load_mnist(data_root(root), download=download).flat()
    elif name == "cifar10":
        ds = real.load_cifar10(data_root(root), download=download)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    return Dataset(ds.x_train, ds.y_train, ds.x_test, ds.y_test, ds.num_classes)


def model_for(data: Dataset) -> torch.nn.Module:
    return _model(torch.from_numpy(data.x_train), data.num_classes)


def _model(x_train: torch.Tensor, num_classes: int) -> torch.nn.Module:
    from harness.models.cnn import small_cnn

    with seeding.torch_global():  # building draws: from nobody else's stream
        if x_train.ndim == 2:
            return mlp((x_train.shape[1], 256, 256, num_classes))
        return small_cnn(x_train.shape[1], num_classes)
