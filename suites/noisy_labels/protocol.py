"""Train inside, judge outside: noisy labels in, predictions out, metrics computed here.

All (variant, seed) cells of one dataset train together as members of one
seed-batched run. The objective only ever sees training inputs with their noisy
labels; clean training labels and test labels stay with the judge below.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness import seeding
from harness.models.mlp import mlp
from harness.objectives.loading import Objective
from harness.train import Protocol, predict, train_members
from suites.base import CellResult, Suite, Variant
from suites.jobs import InvalidOutput, Job, check_array
from suites.noisy_labels.data import digits_split


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray  # clean: never handed to the objective
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int


def protocol_of(suite: Suite) -> Protocol:
    p = suite.protocol
    return Protocol(epochs=p["epochs"], batch_size=p["batch_size"], lr=p["lr"],
                    momentum=p["momentum"], weight_decay=p["weight_decay"],
                    grad_clip=p["grad_clip"], schedule=p["schedule"])


def prepare(suite: Suite, variants: list[Variant], seeds: list[int], *,
            data_root: str | None = None, download: bool = False) -> list[Job]:
    """One job per dataset: training inputs, each member's noisy labels, unlabeled test inputs."""
    by_dataset: dict[str, list[Variant]] = {}
    for v in variants:
        by_dataset.setdefault(v.config["dataset"], []).append(v)
    jobs = []
    for name, group in by_dataset.items():
        data = load_dataset(name, data_root, download)
        members = [(v.name, s) for v in group for s in seeds]
        noisy = np.stack([noisy_labels(data, v, s, data_root) for v in group for s in seeds])
        jobs.append(Job(members,
                        {"x_train": data.x_train, "labels": noisy, "x_eval": data.x_test},
                        {"seeds": [s for _, s in members], "num_classes": data.num_classes,
                         "protocol": dict(suite.protocol), "hook": suite.hook},
                        private=data))
    return jobs


def train(suite: Suite, objective: Objective, inputs: dict[str, np.ndarray], plan: dict, *,
          device: str = "cpu", mode: str = "auto",
          progress: Callable[[float], None] | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Train every member on its noisy labels; predictions and curves out, no labels judged."""
    x_train, labels = torch.from_numpy(inputs["x_train"]), torch.from_numpy(inputs["labels"])
    members = len(plan["seeds"])

    def on_epoch(epoch: int, total: int) -> None:
        if progress is not None:
            progress(members / total)

    model = _model(x_train, plan["num_classes"])
    protocol = protocol_of(suite)
    size = 4 * protocol.epochs * members * sum(p.numel() for p in model.parameters())
    keep = size <= plan.get("epoch_weights_budget", 0)  # the sandbox asks, within its quota
    # With every epoch's weights the judge predicts each epoch itself: no need to here.
    eval_inputs = None if keep else torch.from_numpy(inputs["x_eval"])
    trained = train_members(model, objective.bind(plan["hook"]), x_train, labels,
                            plan["seeds"], protocol, eval_inputs=eval_inputs, mode=mode,
                            device=device, on_epoch=on_epoch, keep_epoch_params=keep)
    outputs = {f"param:{k}": v.numpy() for k, v in trained.params.items()}
    if keep:
        outputs.update({f"epoch_param:{k}": v.numpy() for k, v in trained.epoch_params.items()})
    else:
        outputs["eval_predictions"] = trained.eval_predictions.numpy()
    outputs.update({
        "loss_curve": trained.loss_curve.numpy(),
        "grad_norm_curve": trained.grad_norm_curve.numpy(),
        "diverged_step": np.array([-1 if d is None else d for d in trained.diverged_step],
                                  dtype=np.int64),
    })
    return outputs, {"mode": trained.mode, "fallback_reason": trained.fallback_reason,
                     "wall_time": trained.wall_time}


def judge(suite: Suite, job: Job, outputs: dict[str, np.ndarray], report: dict) -> list[CellResult]:
    """Every member's metrics from what the trainer returned, after checking all of it.

    The final test and training predictions are always recomputed here from the
    returned weights. With every epoch's weights (what the sandbox asks for), so is each
    epoch's test accuracy (the curve and the best-epoch metric); otherwise those come
    from the trainer's per-epoch predictions, whose last epoch must agree with the
    weights.
    """
    data: Dataset = job.private
    protocol = protocol_of(suite)
    m, epochs = len(job.members), protocol.epochs
    loss = check_array(outputs, "loss_curve", (m, epochs), "f")
    grad = check_array(outputs, "grad_norm_curve", (m, epochs), "f")
    steps_per_epoch = -(-len(data.y_train) // protocol.batch_size)
    diverged = check_array(outputs, "diverged_step", (m,), "iu", low=-1,
                           high=steps_per_epoch * epochs)
    alive = diverged < 0
    test_pred, train_pred = _predictions_from_weights(data, outputs, m, alive)
    verified = any(k.startswith("epoch_param:") for k in outputs)
    if verified:  # every epoch's test predictions from that epoch's weights, not the trainer's
        eval_pred = _epoch_predictions(data, outputs, m, epochs, alive)
    else:
        eval_pred = check_array(outputs, "eval_predictions", (epochs, m, len(data.y_test)),
                                "iu", low=0, high=data.num_classes - 1).astype(np.int64)
        agree = (eval_pred[-1][alive] == test_pred[alive]).mean() if alive.any() else 1.0
        if agree < 0.99:
            raise InvalidOutput(f"the returned last-epoch predictions do not come from the "
                                f"returned weights (they agree on {100 * agree:.1f}% of "
                                f"samples)")
    eval_pred[-1] = test_pred
    noisy = job.inputs["labels"]
    per_cell_time = float(report.get("wall_time") or 0.0) / m
    info = {"mode": str(report.get("mode", "")),
            "fallback_reason": report.get("fallback_reason"), "members_batched": m,
            "epochs_verified": verified}
    out = []
    for i, (variant, seed) in enumerate(job.members):
        result = judge_member(data, noisy[i], eval_pred[:, i], train_pred[i])
        result.curves["train_loss"] = loss[i].tolist()
        result.curves["grad_norm"] = grad[i].tolist()
        step = None if diverged[i] < 0 else int(diverged[i])
        status = "ok" if step is None else "diverged"
        if step is not None:  # the frozen model's accuracy is not a result
            result.metrics = {"noise_rate": result.metrics["noise_rate"]}
            epoch = step // steps_per_epoch
            result.curves = {k: v[:epoch + 1] for k, v in result.curves.items()}
        out.append(CellResult(variant, seed, status, result.metrics, result.curves,
                              diverged_step=step, wall_time=per_cell_time, info=info))
    return out


def _predictions_from_weights(data: Dataset, outputs: dict[str, np.ndarray], m: int,
                              alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[M, N_test] and [M, N_train] predictions of the returned stacked weights."""
    model = model_for(data)
    params = {}
    for name, p in model.named_parameters():
        a = check_array(outputs, f"param:{name}", (m, *p.shape), "f")
        if alive.any() and not np.isfinite(a[alive]).all():
            raise InvalidOutput(f"param:{name} is not finite for a member that did not diverge")
        params[name] = torch.from_numpy(np.array(a, dtype=np.float32))  # own, writable copy
    with torch.no_grad():
        test = predict(model, params, torch.from_numpy(data.x_test)).numpy()
        train = predict(model, params, torch.from_numpy(data.x_train)).numpy()
    return test, train


def _epoch_predictions(data: Dataset, outputs: dict[str, np.ndarray], m: int, epochs: int,
                       alive: np.ndarray) -> np.ndarray:
    """[E, M, N_test] predictions of each epoch's returned weights; the last epoch's weights
    must be exactly the final ones."""
    model = model_for(data)
    stacked = {}
    for name, p in model.named_parameters():
        a = check_array(outputs, f"epoch_param:{name}", (epochs, m, *p.shape), "f")
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


def judge_member(data: Dataset, noisy: np.ndarray, eval_predictions: np.ndarray,
          train_predictions: np.ndarray) -> CellResult:
    """Metrics of one member from its predictions: [E, Ne] per epoch on test, [N] on train."""
    _check_predictions(eval_predictions, (eval_predictions.shape[0], len(data.y_test)),
                       data.num_classes)
    _check_predictions(train_predictions, (len(data.y_train),), data.num_classes)
    test_acc = (eval_predictions == data.y_test[None, :]).mean(axis=1)
    flipped = noisy != data.y_train
    metrics = {
        "test_acc": float(test_acc[-1]),
        "best_test_acc": float(test_acc.max()),
        "best_epoch": float(test_acc.argmax() + 1),
        "noise_rate": float(flipped.mean()),
        "train_acc_clean": float((train_predictions == data.y_train).mean()),
    }
    if flipped.any():
        metrics["memorization"] = float((train_predictions[flipped] == noisy[flipped]).mean())
        metrics["correction"] = float(
            (train_predictions[flipped] == data.y_train[flipped]).mean())
    return CellResult("", 0, "ok", metrics, {"test_acc": test_acc.tolist()})


def _check_predictions(pred: np.ndarray, shape: tuple[int, ...], num_classes: int) -> None:
    if pred.shape != shape or pred.dtype.kind not in "iu":
        raise ValueError(f"predictions must be integer class ids of shape {shape}, "
                         f"got {pred.dtype} {pred.shape}")
    if pred.size and (pred.min() < 0 or pred.max() >= num_classes):
        raise ValueError(f"predictions must lie in [0, {num_classes - 1}]")


def noisy_labels(data: Dataset, variant: Variant, seed: int,
                 data_root: str | None = None) -> np.ndarray:
    """The training labels a member sees: drawn from (variant, seed) only."""
    from suites.noisy_labels import noise  # scipy: the trainer (sandbox) never needs it

    kind, rate = variant.config["noise"], variant.config["rate"]
    rng = seeding.rng(seed, seeding.NOISE, variant.name)
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

        path = Path(_data_root(data_root)) / "CIFAR-10_human.pt"
        return load_cifar10n_labels(path, rate, expected_len=len(y)).astype(np.int64)
    raise ValueError(f"unknown noise kind {kind!r}")


def load_dataset(name: str, data_root: str | None, download: bool) -> Dataset:
    if name == "digits":
        x_tr, y_tr, x_te, y_te = digits_split()
        return Dataset(x_tr, y_tr, x_te, y_te, 10)
    from harness.data import real

    root = _data_root(data_root)
    if name == "mnist":
        ds = real.load_mnist(root, download=download).flat()
    elif name == "cifar10":
        ds = real.load_cifar10(root, download=download)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    return Dataset(ds.x_train, ds.y_train, ds.x_test, ds.y_test, ds.num_classes)


def model_for(data: Dataset) -> torch.nn.Module:
    return _model(torch.from_numpy(data.x_train), data.num_classes)


def _model(x_train: torch.Tensor, num_classes: int) -> torch.nn.Module:
    if x_train.ndim == 2:
        return mlp((x_train.shape[1], 256, 256, num_classes))
    from harness.models.cnn import small_cnn

    return small_cnn(x_train.shape[1], num_classes)


def _data_root(data_root: str | None) -> str:
    return data_root or os.environ.get("HARNESS_DATA", str(Path.home() / ".cache" / "harness"))
