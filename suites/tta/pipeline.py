"""prepare → train → judge for the test-time adaptation suite.

One job per scenario, every seed a member. ``prepare`` (trusted) loads the fixtures — the
corrupted pool and each seed's source model, built once and cached — and draws each
seed's stream; the stream's labels stay with the judge. ``train`` adapts every member
along its stream (:mod:`suites.tta.adapt`) and returns the prediction counted for every
sample and the clean-pool predictions after the stream. ``judge`` checks those
probabilities and computes every metric from them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.contract.judging import Failure, cell_results
from harness.contract.outputs import check_array, probability_rows
from harness.contract.pipeline import InvalidOutput, Job, Pipeline, TrainOutput
from harness.contract.suite import CellResult, Suite, Variant
from harness.data import fixtures
from harness.objectives.loading import LoadedObjective
from harness.train import ObjectiveRuntimeError, per_member_of
from suites.tta import CORRUPTIONS, HELD_OUT, SEVERITIES, streams
from suites.tta import adapt as a
from suites.tta.metrics import member_metrics


@dataclass
class Private:
    """What only the judge sees: every member's stream labels and where samples came from."""

    labels: np.ndarray  # [M, T]
    corruption: np.ndarray  # [M, T] index into CORRUPTIONS + HELD_OUT
    severity: np.ndarray  # [M, T]
    clean_labels: np.ndarray  # [N]
    batches: list[tuple[int, int]]
    fixtures: list[dict[str, str]]  # per member: fixture name -> cache key
    searching: bool = False  # a tuned search: the stream is of held-out corruptions only

    def repeated(self, k: int) -> Private:
        """The members' rows ``k`` times over (a tuned search's trials, trial-major)."""
        tile = lambda a: np.concatenate([a] * k)  # noqa: E731
        return Private(tile(self.labels), tile(self.corruption), tile(self.severity),
                       self.clean_labels, self.batches, self.fixtures * k, self.searching)


class TestTimeAdaptation(Pipeline):
    member_inputs, member_plan = ("where", "source.*"), ("seeds",)  # a tuned run's trials
    binds_choices = True  # each member's own hyperparameter values, strings too (a loop)

    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        """A tuned search (``settings["searching"]``) streams each scenario over the four
        held-out corruptions alone, which trials are chosen on; the tuned track's final
        run leaves them out of the iid stream (they chose its settings: not held out)."""
        searching = bool(suite.settings.get("searching"))
        heldout = 0 if suite.track != "defaults" else len(HELD_OUT)
        jobs = []
        for variant in variants:
            config = dict(variant.config)
            if searching and config["dataset"] != "digits":
                raise ValueError(f"{variant.name}: a tuned search streams the held-out "
                                 f"corruptions, which only digits-C has here")
            data = _data(suite, config, data_root, download)
            where = {"data_root": data_root, "download": download}
            models = [fixtures.load(suite, "source_model", s, data["model_config"],
                                    where=where) for s in seeds]
            made = [streams.build(config["scenario"], data["labels"],
                                  corruptions=len(HELD_OUT if searching else CORRUPTIONS),
                                  heldout=0 if searching else heldout, seed=s,
                                  batch_size=int(config["batch_size"]),
                                  severity=int(suite.settings["severity"]),
                                  delta=float(suite.settings["delta"]),
                                  prior_concentration=float(suite.settings["prior_concentration"]))
                    for s in seeds]
            if searching:
                made = [streams.shifted(s, len(CORRUPTIONS)) for s in made]
            if any(s.batches != made[0].batches or s.resets != made[0].resets for s in made):
                raise RuntimeError("streams of different seeds must share batch boundaries")
            domain = data["domain"]
            where = np.stack([np.stack([_domains(s, domain), s.image], axis=-1)
                              for s in made]).astype(np.int64)
            corruption = np.stack([np.array([g.corruption for g in s.segments])[s.segment]
                                   for s in made])
            severity = np.stack([np.array([g.severity for g in s.segments])[s.segment]
                                 for s in made])
            inputs = {"pool": data["pool"], "where": where, "clean": data["clean"],
                      "fisher_x": data["fisher_x"],
                      **{f"source.{k}": np.stack([b.arrays[k] for b in models])
                         for k in models[0].arrays}}
            plan = {"seeds": list(seeds), "architecture": data["architecture"],
                    "num_classes": 10, "batch_size": int(config["batch_size"]),
                    "batches": [list(b) for b in made[0].batches], "resets": made[0].resets}
            private = Private(np.stack([data["labels"][s.image] for s in made]), corruption,
                              severity, data["clean_labels"], made[0].batches,
                              [{"pool": data["pool_key"], "source_model": b.key} for b in models],
                              searching)
            jobs.append(Job([(variant.name, s) for s in seeds], inputs, plan, private))
        return jobs

    def fixtures(self, suite: Suite, variants: list[Variant],
                 seeds: list[int]) -> list[tuple[str, int | None, dict[str, Any] | None]]:
        needed: list[tuple[str, int | None, dict[str, Any] | None]] = []
        for variant in variants:
            digits = variant.config["dataset"] == "digits"
            entries = ([("digits_c", None, None)] if digits else []) + [
                ("source_model", s, _model_config(variant.config)) for s in seeds]
            needed += [e for e in entries if e not in needed]
        return needed

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        hooks = {h: objective.bind(h) for h in (a.LOSS, a.ADJUST) if h in objective.hooks}
        if not hooks:
            raise ObjectiveRuntimeError(f"{objective.name} defines neither {a.LOSS} nor "
                                        f"{a.ADJUST}: this suite runs only test-time objectives")
        try:
            opts = a.options(objective.model)
        except ValueError as exc:
            raise ObjectiveRuntimeError(f"{objective.name}: {exc}") from exc
        t = lambda k: torch.from_numpy(np.ascontiguousarray(inputs[k]))  # noqa: E731
        source = {k.removeprefix("source."): t(k) for k in inputs if k.startswith("source.")}
        adapter = a.Adapter(plan["architecture"], source, hooks, opts, suite.settings,
                            mode=mode, fisher_x=t("fisher_x"), batch_size=plan["batch_size"],
                            per_member=per_member_of(plan))
        out = a.adapt(adapter, t("pool"), t("where"), t("clean"),
                      [tuple(b) for b in plan["batches"]], list(plan["resets"]),
                      int(plan["batch_size"]), int(plan["num_classes"]), progress)
        arrays = {"probs": a.as_numpy(out.probs).astype(np.float32),
                  "clean_probs": a.as_numpy(out.clean_probs).astype(np.float32),
                  "diverged": np.array(out.diverged, np.int64),
                  "resets": np.array(out.resets, np.int64),
                  "updated": np.array(out.updated, np.int64)}
        return TrainOutput(arrays, {"mode": out.mode, "wall_time": out.wall_time,
                                    "fallback_reason": out.fallback_reason,
                                    "options": opts.to_json()})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        p: Private = job.private
        members, total = p.labels.shape
        k = int(job.plan["num_classes"])
        probs = check_array(output.arrays, "probs", (members, total, k), "f")
        clean = check_array(output.arrays, "clean_probs", (members, len(p.clean_labels), k),
                            "f")
        diverged = check_array(output.arrays, "diverged", (members,), "iu")
        resets = check_array(output.arrays, "resets", (members,), "iu")
        updated = check_array(output.arrays, "updated", (members,), "iu")
        n_batches = len(p.batches)
        for step in diverged:
            if not -1 <= step < n_batches:
                raise InvalidOutput(f"diverged batch {int(step)} is outside the stream")

        def member(i: int) -> tuple[dict[str, float], dict[str, list[float]]] | Failure:
            why = problem(probs[i], p.batches) or problem(clean[i], None)
            if why:
                return Failure(f"tta_adjust {why}")
            metrics, curves = member_metrics(probs[i].argmax(-1), clean[i].argmax(-1), p, i)
            metrics["resets"] = float(resets[i])
            metrics["updated"] = float(updated[i]) / n_batches
            return metrics, curves

        return cell_results(job, output, member, diverged=diverged,
                            info={"options": output.info.get("options")},
                            member_info=lambda i: {"fixtures": p.fixtures[i]},
                            fails_at_start="tta_loss was not finite on the first batch (NaN "
                                           "or ±inf), so no prediction after it can be judged")


def problem(probs: np.ndarray, batches: list[tuple[int, int]] | None) -> str:
    """Why ``probs [T, K]`` are not probabilities ('' when they are), naming the first
    offending batch (``None``: the clean pool after the stream)."""
    def at(row: int) -> str:
        if batches is None:
            return "on the clean pool after the stream"
        return f"at batch {next(b for b, (lo, hi) in enumerate(batches) if lo <= row < hi)}"

    return probability_rows(probs, slack=1e-6, at=at)


def _domains(stream: streams.Stream, domain: Mapping[tuple[int, int], int]) -> np.ndarray:
    rows = np.array([domain[(g.corruption, g.severity)] for g in stream.segments])
    return rows[stream.segment]


def _data(suite: Suite, config: Mapping[str, Any], data_root: str | None,
          download: bool) -> dict[str, Any]:
    """The pool of corrupted images, its domains and labels, the clean pool, the samples
    for EATA's Fisher and the source model's fixture config, for the variant's data set."""
    domains = [(c, s) for c in range(len(CORRUPTIONS) + len(HELD_OUT)) for s in SEVERITIES]
    n_fisher = int(suite.settings["fisher_samples"])
    if config["dataset"] == "digits":
        from harness.data.digits import digits_split

        x_train, _, x_pool, y_pool = digits_split()
        built = fixtures.load(suite, "digits_c")
        images = built.arrays["images"]
        pool = images.reshape(-1, *images.shape[2:])
        return {"pool": pool, "domain": {d: i for i, d in enumerate(domains)},
                "labels": y_pool, "clean": x_pool, "clean_labels": y_pool,
                "fisher_x": x_train[:n_fisher], "architecture": "bn-mlp",
                "model_config": _model_config(config), "pool_key": built.key}
    from harness.data import data_root as default_root
    from harness.data.real import load_cifar10
    from suites.tta.cifar10c import load_cifar10c

    root = data_root or default_root()
    severity = int(suite.settings["severity"])
    images, labels = load_cifar10c(root, CORRUPTIONS, severity, download=download)
    d = load_cifar10(root, download=download)
    rng = np.random.default_rng(0)
    fisher = d.x_train[rng.choice(len(d.x_train), min(n_fisher, len(d.x_train)),
                                  replace=False)]
    return {"pool": images, "domain": {(c, severity): c for c in range(len(CORRUPTIONS))},
            "labels": labels, "clean": d.x_test, "clean_labels": d.y_test,
            "fisher_x": fisher, "architecture": "bn-cnn",
            "model_config": _model_config(config), "pool_key": "CIFAR-10-C (released files)"}


def _model_config(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a variant adds to the source-model fixture's config (digits: nothing). The
    CIFAR-10 model trains on a GPU when there is one; the device is part of the config, so
    of the key, because a CPU-trained model is a different fixture."""
    if config["dataset"] == "digits":
        return None
    return {"dataset": "cifar10", "architecture": "bn-cnn", "epochs": 30, "lr": 1e-3,
            "batch_size": 128, "device": "cuda" if torch.cuda.is_available() else "cpu"}
