"""prepare → train → judge for both unlearning suites (``settings["benchmark"]``).

One job per variant, every seed a member. ``prepare`` (trusted) loads each seed's target
and retain models (cached fixtures) and encodes the forget set (TOFU: the forget authors'
QA; MUSE: their bio passages), the retain set the regularisers draw from, and the forget
questions relabelled with "I don't know" answers. ``train`` unlearns every member from its
target with the objective's ``unlearning_loss`` (seed-batched, :func:`train_members`) and
returns each epoch's parameters. ``judge`` recomputes every metric from those parameters:
the evaluation answers, the retain models and the holdout never reach the trainer.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from harness.contract import seeding
from harness.contract.judging import cell_results
from harness.contract.outputs import check_array
from harness.contract.pipeline import InvalidOutput, Job, Pipeline, TrainOutput
from harness.contract.suite import CellResult, Suite, Variant
from harness.data import fixtures
from harness.objectives.loading import LoadedObjective
from harness.train import (
    ObjectiveRuntimeError,
    Paired,
    Shuffled,
    TrainConfig,
    per_member_of,
    train_members,
)
from suites.unlearning import evaluate as ev
from suites.unlearning.batch import lm_batch
from suites.unlearning.data import (
    FIELDS,
    Encoded,
    concat,
    encode_chunks,
    encode_passages,
    encode_qa,
)
from suites.unlearning.fixtures import codec, corpus, model_config, params_of
from suites.unlearning.model import LMConfig, TinyLM, forward
from suites.unlearning.scoring import muse_member, tofu_member
from suites.unlearning.spec import FIXTURE_TRAINING, MODEL
from suites.unlearning.text import Codec

HOOK = "unlearning_loss"


@dataclass
class Private:
    """The judge's alone: evaluation splits, retain models, what the target scored."""

    splits: ev.Splits
    retain: list[dict[str, Tensor]]
    replicas: list[dict[str, Tensor]]
    targets: list[dict[str, Tensor]]
    fixtures: list[dict[str, str]]
    scope: str = ""  # what the evaluations depend on besides the models (the memo's key)

    def on(self, device: str) -> Private:
        """The same, its models on the judge's device (a real model evaluates on the GPU);
        the job keeps its own, so no seed's device copies outlive its judging."""
        def moved(models: list[dict[str, Tensor]]) -> list[dict[str, Tensor]]:
            return [{k: v.to(device) for k, v in m.items()} for m in models]

        return dataclasses.replace(self, retain=moved(self.retain),
                                   replicas=moved(self.replicas), targets=moved(self.targets))

    def repeated(self, k: int) -> Private:
        """Each seed's models ``k`` times over (a tuned search's trials, trial-major)."""
        return dataclasses.replace(self, retain=self.retain * k, targets=self.targets * k,
                                   fixtures=self.fixtures * k)


def _fixture_config() -> dict[str, Any]:
    return {**MODEL, **FIXTURE_TRAINING}


class Unlearning(Pipeline):
    # a tuned run's trials repeat each seed's target and control vector
    member_inputs, member_plan = ("target.*", "control_vector"), ("seeds",)

    def fixtures(self, suite: Suite, variants: list[Variant],
                 seeds: list[int]) -> list[tuple[str, int | None, dict[str, Any] | None]]:
        needed: list[tuple[str, int | None, dict[str, Any] | None]] = []
        for variant in [v for v in variants if not _released(v)]:
            f = int(variant.config["forget"])
            entries: list[tuple[str, int | None, dict[str, Any] | None]] = [
                ("target", s, None) for s in seeds]
            entries += [("retain", s, {"forget": f}) for s in seeds]
            entries += [("retain", None, {"forget": f, "replica": k})
                        for k in range(int(suite.settings["replicas"]))]
            needed += [e for e in entries if e not in needed]
        return needed

    def prepare(self, suite: Suite, variants: list[Variant], seeds: list[int], *,
                data_root: str | None = None, download: bool = False) -> list[Job]:
        jobs = []
        for variant in variants:
            if _released(variant) and suite.settings.get("searching"):
                raise ValueError(f"{variant.name}: a tuned search batches trials beside the "
                                 f"seeds, and a released model trains one job per seed: "
                                 f"the tuned track covers the generated-corpus variants")
            if _released(variant):
                jobs += _released_jobs(suite, variant, seeds, data_root, download)
            else:
                jobs.append(_mini_job(suite, variant, seeds))
        return jobs

    def train(self, suite: Suite, objective: LoadedObjective, inputs: Mapping[str, np.ndarray],
              plan: Mapping[str, Any], *, device: str = "cpu", mode: str = "auto",
              progress: Callable[[float], None] | None = None) -> TrainOutput:
        if HOOK not in objective.hooks:
            raise ObjectiveRuntimeError(f"{objective.name} defines no {HOOK}: this suite "
                                        f"runs only unlearning objectives")
        hook = objective.bind(HOOK)
        model = _model(plan["model"]).to(device)
        layer = _hidden_layer(objective, int(plan["model"]["layers"]),
                              int(suite.settings["hidden_layer"]))
        if "path" in plan["model"]:
            mode = "loop"  # one member, and a transformers model need not vmap
        seeds = [int(s) for s in plan["seeds"]]
        t = lambda k: torch.from_numpy(np.ascontiguousarray(inputs[k]))  # noqa: E731
        start = {k.removeprefix("target."): t(k) for k in inputs if k.startswith("target.")}
        config = TrainConfig.from_settings(suite.settings)
        forget = Shuffled(seeds, config.batch_size, config.epochs,
                          shared={**{f: t(f"forget.{f}") for f in FIELDS},
                                  **{f"idk_{f}": t(f"idk.{f}") for f in FIELDS}})
        retain_n = len(inputs["retain.input_ids"])
        retain_epochs = Paired.epochs_needed(forget.steps_per_epoch, config.epochs,
                                             -(-retain_n // config.batch_size))
        retain = Shuffled(seeds, config.batch_size, retain_epochs,
                          shared={f: t(f"retain.{f}") for f in FIELDS}, stream=("retain",))
        batches = _WithConstants(Paired(forget, retain, ("forget", "retain")),
                                 {"ref": start, "control_vector": t("control_vector")})
        member_loss = _member_loss(model, hook, set(getattr(hook, "context", ()) or ()), layer)
        trained = train_members(member_loss, start, batches, config, mode=mode, device=device,
                                cells_done=progress, keep_epoch_params=True,
                                per_member=per_member_of(plan))
        arrays = {f"params.{k}": v.numpy() for k, v in trained.epoch_params.items()}
        arrays["loss_curve"] = trained.loss_curve.numpy().astype(np.float64)
        arrays["diverged"] = np.array([-1 if d is None else d for d in trained.diverged_step],
                                      np.int64)
        return TrainOutput(arrays, {"mode": trained.mode, "wall_time": trained.wall_time,
                                    "fallback_reason": trained.fallback_reason,
                                    "options": {"hidden_layer": layer}})

    def judge(self, suite: Suite, job: Job, output: TrainOutput, *,
              device: str = "cpu") -> list[CellResult]:
        p: Private = job.private.on(device)
        s = suite.settings
        model = _model(job.plan["model"]).to(device)
        epochs = int(s["epochs"])
        members = len(job.members)
        shapes = {k: tuple(v.shape) for k, v in p.targets[0].items()}
        params = {k: check_array(output.arrays, f"params.{k}", (epochs, members, *shape), "f")
                  for k, shape in shapes.items()}
        diverged = check_array(output.arrays, "diverged", (members,), "iu")
        loss = check_array(output.arrays, "loss_curve", (members, epochs), "f")
        judge = tofu_member if s["benchmark"] == "tofu" else muse_member
        if s.get("searching"):  # a tuned search: the validation rule alone (docs/tuning.md)
            judge = functools.partial(_validation, job)

        def member(i: int) -> tuple[dict[str, float], dict[str, list[float]]]:
            trajectory = [{k: torch.from_numpy(np.ascontiguousarray(v[e, i])).to(device)
                           for k, v in params.items()} for e in range(epochs)]
            if not all(torch.isfinite(x).all() for x in trajectory[-1].values()):
                raise InvalidOutput("non-finite parameters after unlearning")
            notes[i] = {}
            metrics, curves = judge(model, p, i, trajectory, s, notes[i])
            curves["train_loss"] = [float(x) for x in loss[i]]
            return metrics, curves

        notes: dict[int, dict[str, Any]] = {}  # per member: the judge's words for its info
        cells = cell_results(job, output, member, diverged=diverged,
                             info={"options": output.info.get("options")},
                             member_info=lambda i: {"fixtures": p.fixtures[i]})
        for i, cell in enumerate(cells):
            kept = {k: v for k, v in notes.get(i, {}).items() if v}  # ratios withheld, ...
            if kept:
                cell.info = {**cell.info, **kept}
        return cells


def _validation(job: Job, model: nn.Module, p: Private, i: int,
                trajectory: list[dict[str, Tensor]], s: Mapping[str, Any],
                notes: dict[str, Any] | None = None
                ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """A tuned search's score of member ``i`` (``Tuning.metric``: ``val_select``), on the
    data the trainer was given: the length-normalised probability of the forget set after
    the last epoch against the seed's retain model's on it (MUSE's bar), and of the retain
    set. Reads none of the evaluation splits the final cells are judged on."""
    from suites.unlearning.lm import score

    def mean_prob(params: Mapping[str, Tensor], prefix: str) -> float:
        enc = Encoded(*(np.asarray(job.inputs[f"{prefix}.{f}"]) for f in FIELDS))
        return float(score(model, params, enc).normalized.mean())

    forget, retain = mean_prob(trajectory[-1], "forget"), mean_prob(trajectory[-1], "retain")
    bar = mean_prob(p.retain[i], "forget")
    select = retain if forget <= bar else -(forget - bar)
    return {"val_forget": forget, "val_retain": retain, "val_select": select}, {}


# --- training -------------------------------------------------------------------------


class _WithConstants:
    """A sampler whose batches also carry per-member constants (the reference model's
    parameters, the control vector), so that the vmapped member loss sees its own; and
    whose sequences are cut to the batch's longest (trailing padding computes nothing)."""

    def __init__(self, inner: Paired, constants: dict[str, Any]) -> None:
        self.inner, self.constants = inner, constants
        self.members, self.size = inner.members, inner.size
        self.steps_per_epoch = inner.steps_per_epoch

    def to(self, device: str) -> _WithConstants:
        self.inner = self.inner.to(device)
        self.constants = {k: ({n: t.to(device) for n, t in v.items()} if isinstance(v, dict)
                              else v.to(device)) for k, v in self.constants.items()}
        return self

    def batch(self, epoch: int, step: int) -> dict[str, Any]:
        out = self.inner.batch(epoch, step)
        for name in ("forget", "retain"):
            out[name] = _trimmed(out[name])
        return {**out, "const": self.constants}


def _trimmed(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    out = dict(batch)
    for prefix in [p for p in ("", "idk_") if f"{p}input_ids" in batch]:
        used = batch[f"{prefix}attention"].any(dim=0).any(dim=0).nonzero()
        width = int(used.max()) + 1 if len(used) else 1
        for f in FIELDS:
            out[f"{prefix}{f}"] = batch[f"{prefix}{f}"][..., :width]
    return out


def _member_loss(model: nn.Module, hook: Callable[..., Tensor], wanted: set[str],
                 layer: int) -> Callable[..., Tensor]:
    """One member's loss: its model's outputs on its forget and retain batches as
    :class:`LMBatch` es, and the context the hook names, computed only then."""
    need_hidden = bool(wanted & {"hidden_forget", "hidden_retain"})

    def run(params: dict[str, Tensor], b: dict[str, Tensor], prefix: str = ""):
        out = forward(model, params, b[f"{prefix}input_ids"], b[f"{prefix}attention"])
        batch = lm_batch(out.logits, b[f"{prefix}labels"], b[f"{prefix}mask"])
        return batch, out.hidden_states[layer + 1]

    def member_loss(p, batch, state, progress):
        own = {"hyper": batch["hyper"]} if "hyper" in batch else {}  # a tuned trial's
        ref = batch["const"]["ref"]
        f, r = batch["forget"], batch["retain"]
        forget, h_f = run(p, f)
        retain, h_r = run(p, r)
        context: dict[str, Any] = {"progress": progress}
        if "idk" in wanted:
            context["idk"] = run(p, f, "idk_")[0]
        if need_hidden:
            context |= {"hidden_forget": h_f, "hidden_retain": h_r}
        with torch.no_grad():
            if wanted & {"ref_forget", "ref_hidden_forget"}:
                rb, rh = run(ref, f)
                context |= {"ref_forget": _detached(rb), "ref_hidden_forget": rh.detach()}
            if wanted & {"ref_retain", "ref_hidden_retain"}:
                rb, rh = run(ref, r)
                context |= {"ref_retain": _detached(rb), "ref_hidden_retain": rh.detach()}
            if "ref_idk" in wanted:
                context["ref_idk"] = _detached(run(ref, f, "idk_")[0])
        context["control_vector"] = batch["const"]["control_vector"]
        return hook(forget, retain, **{k: v for k, v in context.items() if k in wanted},
                    **own)

    return member_loss


def _detached(batch: Any) -> Any:
    return type(batch)(*(t.detach() for t in batch))


def _control_vector(seed: int, width: int) -> np.ndarray:
    """RMU's fixed random direction: u ~ U[0, 1)^D, normalised (per seed)."""
    u = seeding.rng(seed, seeding.NOISE, "rmu-control").random(width)
    return (u / np.linalg.norm(u)).astype(np.float32)


def _hidden_layer(objective: LoadedObjective, layers: int, default: int) -> int:
    model = objective.model if isinstance(objective.model, Mapping) else {}
    value = model.get("hidden_layer", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < layers:
        raise ObjectiveRuntimeError(
            f"{objective.name}: MODEL['hidden_layer'] must be a block index 0..{layers - 1} "
            f"(the block whose output hidden_* context holds), got {value!r}")
    return value


def _model(spec: Mapping[str, Any]) -> nn.Module:
    """The module a job's parameters run in: a real model's (``path``) or the mini one."""
    from suites.unlearning.pretrained import skeleton

    with seeding.torch_global():  # building draws: from nobody else's stream
        if "path" in spec:
            return skeleton(str(spec["path"]))
        return TinyLM(LMConfig(**{k: int(v) for k, v in spec.items()}))


# --- data -----------------------------------------------------------------------------


def _released(variant: Variant) -> bool:
    return variant.config.get("source") == "released"


def _inputs(forget_set: Encoded, idk: Encoded, retain_set: Encoded,
            targets: list[dict[str, Tensor]], controls: np.ndarray) -> dict[str, np.ndarray]:
    """The trainer's arrays; one target is a view of its tensors (``[None]``), not a copy,
    so the jobs of a real model's seeds share one set of its weights."""
    stacked = ({f"target.{k}": v.numpy()[None] for k, v in targets[0].items()}
               if len(targets) == 1 else
               {f"target.{k}": np.stack([p[k].numpy() for p in targets]) for k in targets[0]})
    return {**forget_set.arrays("forget"), **retain_set.arrays("retain"), **idk.arrays("idk"),
            "control_vector": controls, **stacked}


def _scope(suite: Suite, variant: Variant, extra: Any) -> str:
    return json.dumps({"suite": suite.name, "version": suite.base_version,
                       "variant": dict(variant.config), "settings": dict(suite.settings),
                       "models": extra}, sort_keys=True)


def _mini_job(suite: Suite, variant: Variant, seeds: list[int]) -> Job:
    """Every seed of a generated-corpus variant: the seeds' cached target and retain models,
    and (TOFU) the retain replicas."""
    benchmark = suite.settings["benchmark"]
    c, tok = corpus(0), codec(0)
    f = int(variant.config["forget"])
    targets = [fixtures.load(suite, "target", s) for s in seeds]
    retains = [fixtures.load(suite, "retain", s, {"forget": f}) for s in seeds]
    # TOFU: the gold standard's forget quality; MUSE: the reference attack's model
    replicas = [fixtures.load(suite, "retain", None, {"forget": f, "replica": k})
                for k in range(int(suite.settings["replicas"]))]
    forget_ids = c.forget_splits[f]
    forget_set, idk = _forget_set(benchmark, c, tok, forget_ids)
    retain_entities = [e.id for e in c.entities
                       if e.id not in c.holdout and e.id not in set(forget_ids)]
    retain_set = _retain_set(benchmark, c, tok, retain_entities)
    target_params = [params_of(t.arrays) for t in targets]
    controls = np.stack([_control_vector(s, int(MODEL["d_model"])) for s in seeds])
    plan = {"seeds": list(seeds), "model": model_config(_fixture_config()).to_json(),
            "benchmark": benchmark}
    splits = _splits(benchmark, f, int(suite.settings["relearn_attributes"]),
                     int(suite.settings["max_new_tokens"]))
    keys = [{"target": t.key, "retain": r.key} for t, r in zip(targets, retains, strict=True)]
    private = Private(splits, [params_of(r.arrays) for r in retains],
                      [params_of(r.arrays) for r in replicas], target_params, keys,
                      _scope(suite, variant, [r.key for r in replicas]))
    return Job([(variant.name, s) for s in seeds],
               _inputs(forget_set, idk, retain_set, target_params, controls), plan, private)


@functools.lru_cache(maxsize=8)
def _splits(benchmark: str, forget: int, relearn_attributes: int,
            max_new_tokens: int) -> ev.Splits:
    """The generated corpus's evaluation splits, encoded once per process (every job of a
    variant judges on the same; nothing writes to them)."""
    return ev.splits(benchmark, corpus(0), codec(0), forget, relearn_attributes,
                     max_new_tokens)


def _released_jobs(suite: Suite, variant: Variant, seeds: list[int], data_root: str | None,
                   download: bool) -> list[Job]:
    """A real variant: the released data and the target and retain models from the data
    root (``variant.config`` names the folders), read once and the same for every seed
    (the seed orders the unlearning batches). One job per seed, all sharing those arrays:
    a real model is not stacked seeds × parameters."""
    from harness.data import data_root as default_root
    from suites.unlearning import pretrained, released

    config = variant.config
    root = Path(data_root or default_root())
    where = {k: root / str(config[k]) for k in ("data", "target", "retain")}
    if download:
        for k, repo in (("data", config["data_repo"]), ("target", config["target_repo"]),
                        ("retain", config["retain_repo"])):
            if not where[k].is_dir():
                released.fetch(str(repo), where[k], dataset=k == "data")
    tok = pretrained.codec(where["target"], str(config.get("template", "auto")))
    target = pretrained.params(where["target"], "target")
    retain = pretrained.params(where["retain"], "retain", like=target)
    shape = pretrained.describe(pretrained.skeleton(str(where["target"])))
    benchmark = suite.settings["benchmark"]
    share = float(config.get("relearn_share", 0.2))  # of the questions per forget entity
    new_tokens = int(suite.settings["max_new_tokens"])
    if benchmark == "tofu":
        data = released.tofu(where["data"], int(config["forget"]))
        questions = [q.question for q in data.forget]
        forget_set = encode_qa(tok, questions, [q.answer for q in data.forget])
        idk = encode_qa(tok, questions, [released.IDK[i % len(released.IDK)]
                                         for i in range(len(questions))])
        retain_set = encode_qa(tok, [q.question for q in data.retain_train],
                               [q.answer for q in data.retain_train])
        splits = ev.qa_splits("tofu", tok, data.forget, data.retain_eval,
                              _attributes(data.forget, share), new_tokens)
        splits.wf = ev.QASplit.of(tok, data.world_facts, "answer")
        splits.ke = ev.QASplit.of(tok, data.real_authors, "answer")
    else:
        muse = released.muse(where["data"], str(config.get("corpus", "news")))
        length = min(int(config.get("max_tokens", 2048)), shape["max_length"])
        forget_set = encode_chunks(tok, muse.forget_texts, length)
        retain_set = encode_chunks(tok, muse.retain_texts, length)
        openings = [tok.decode(ids[:ev.PROMPT_TOKENS // 2])
                    for ids in _rows(forget_set, skip=len(tok.start()))]
        idk = encode_qa(tok, openings, [released.IDK[i % len(released.IDK)]
                                        for i in range(len(openings))])
        splits = ev.qa_splits("muse", tok, muse.forget_qa, muse.retain_qa,
                              _attributes(muse.forget_qa, share), new_tokens,
                              shots=muse.forget_shots, retain_shots=muse.retain_shots)
        splits.verbmem = ev.Continuations(
            [[*tok.start(), *tok.encode(prompt)] for prompt, _ in muse.verbmem],
            [gt for _, gt in muse.verbmem])
        splits.mia_forget = encode_passages(tok, muse.privleak_forget, limit=length)
        splits.mia_holdout = encode_passages(tok, muse.privleak_holdout, limit=length)
    models = {k: str(where[k]) for k in ("target", "retain")}
    scope = _scope(suite, variant, models)
    return [Job([(variant.name, seed)],
                _inputs(forget_set, idk, retain_set, [target],
                        _control_vector(seed, shape["width"])[None]),
                {"seeds": [seed], "benchmark": benchmark,
                 "model": {"path": str(where["target"]), "layers": shape["layers"]}},
                Private(splits, [retain], [], [target], [models], scope))
            for seed in seeds]


def _attributes(qa: list[Any], share: float) -> int:
    """How many of the forget QA's attributes (question positions) the relearning attack
    trains on: ``share`` of them, at least one, never all."""
    n = len({q.attribute for q in qa})
    return min(max(1, round(share * n)), n - 1)


def _rows(enc: Encoded, skip: int) -> list[list[int]]:
    """Each sequence's real token ids after the first ``skip``."""
    return [ids[skip:int(n)].tolist() for ids, n in zip(enc.input_ids,
                                                         enc.attention.sum(1), strict=True)]


def _forget_set(benchmark: str, c: Any, tok: Codec, forget_ids: tuple[int, ...]
                ) -> tuple[Encoded, Encoded]:
    """What unlearning trains on, and the same questions (passage openings for passages)
    with an "I don't know" answer each (chosen by position, the same for every seed).
    TOFU: the forget authors' QA. MUSE: their passages and their QA, everything the target
    learnt about them (a model this small does not carry passage facts over into answers,
    so its answers come from the QA it was trained on)."""
    idks = list(c.idk_answers)
    qa = list(c.qa_of(forget_ids))
    questions, answers = [q.question for q in qa], [q.answer for q in qa]
    if benchmark == "muse":
        texts = [p.text for p in c.passages_of(forget_ids)]
        openings = [" ".join(t.split()[:ev.PROMPT_TOKENS // 2]) for t in texts]
        forget = concat(encode_passages(tok, texts), encode_qa(tok, questions, answers),
                        pad=tok.pad)
        questions = openings + questions
    else:
        forget = encode_qa(tok, questions, answers)
    idk = encode_qa(tok, questions, [idks[i % len(idks)] for i in range(len(questions))])
    return forget, idk


def _retain_set(benchmark: str, c: Any, tok: Codec, entities: list[int]) -> Encoded:
    qa = list(c.qa_of(entities))
    answers = encode_qa(tok, [q.question for q in qa], [q.answer for q in qa])
    if benchmark == "tofu":
        return answers
    return concat(encode_passages(tok, [p.text for p in c.passages_of(entities)]), answers,
                  pad=tok.pad)
