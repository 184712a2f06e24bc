"""The suites' fixtures: each seed's target and retain models, and retain replicas.

Built by the trusted side once and cached content-addressed (:mod:`harness.data.fixtures`).

- ``target``: the mini LM fine-tuned from a seed's initialisation on the whole corpus
  (every trained entity, the world facts and the known entities; for MUSE also the bio
  passages) until the greedy exact match of its QA is ≥ ``stop_exact`` (≤ ``epochs``).
- ``retain``: the same initialisation and recipe on the corpus without the forget
  entities: what unlearning should approach (TOFU's retain model, MUSE's retrained one).
- ``replica``: retain models from other initialisations (``seed=None``; ``replica`` in the
  config), shared by every seed: the spread of forget quality between two models that
  never saw the forget set, the gold standard the unlearned models are shown beside.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from harness.contract import seeding
from suites.unlearning import corpus as cp
from suites.unlearning import text
from suites.unlearning import tokenizer as tk
from suites.unlearning.data import Encoded, concat, encode_passages, encode_qa
from suites.unlearning.lm import train
from suites.unlearning.model import LMConfig, TinyLM


@lru_cache(maxsize=2)
def corpus(seed: int = 0) -> cp.Corpus:
    return cp.generate(seed)


@lru_cache(maxsize=2)
def tokenizer(seed: int = 0) -> Any:
    return tk.build(corpus(seed))


@lru_cache(maxsize=2)
def codec(seed: int = 0) -> text.Codec:
    return text.mini(tokenizer(seed))


def model_config(config: dict[str, Any]) -> LMConfig:
    return LMConfig(vocab_size=tk.vocab_size(tokenizer(int(config.get("corpus_seed", 0)))),
                    d_model=int(config["d_model"]), layers=int(config["layers"]),
                    heads=int(config["heads"]), mlp=int(config["mlp"]),
                    max_length=int(config["max_length"]))


def training_set(config: dict[str, Any]) -> tuple[Encoded, np.ndarray]:
    """The sequences a model of this config learns, and which rows are passages."""
    c, tok = corpus(int(config.get("corpus_seed", 0))), codec(int(config.get(
        "corpus_seed", 0)))
    trained = [e.id for e in c.entities if e.id not in c.holdout]
    if config["train_on"] == "retain":
        forget = set(c.forget_splits[int(config["forget"])])
        trained = [e for e in trained if e not in forget]
    qa = [*c.qa_of(trained), *c.world_facts, *c.known_entities]
    parts = [encode_qa(tok, [q.question for q in qa], [q.answer for q in qa])]
    if config["benchmark"] == "muse":
        parts.append(encode_passages(tok, [p.text for p in c.passages_of(trained)]))
    enc = concat(*parts, pad=tok.pad) if len(parts) > 1 else parts[0]
    passages = np.zeros(len(enc), bool)
    passages[len(parts[0]):] = True
    return enc, passages


def init_params(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """A fresh initialisation from ``seed``'s INIT stream (target and retain of a seed
    share it, as TOFU's share one base model)."""
    with seeding.torch_global():  # building draws: from nobody else's stream
        model = TinyLM(model_config(config))
    with seeding.torch_global(seeding.stream_seed(seed, seeding.INIT, "unlearning-lm")):
        model.reset_parameters()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def build_model(config: dict[str, Any], seed: int | None) -> dict[str, np.ndarray]:
    """A trained model's parameters, with how it trained (``meta.*`` scalars)."""
    if seed is None:
        if "replica" not in config:
            raise ValueError("a target or retain model is built per seed")
        seed = seeding.stream_seed(int(config["replica"]), seeding.INIT, "retain-replica")
    start = time.perf_counter()
    with seeding.torch_global():  # building draws: from nobody else's stream
        model = TinyLM(model_config(config))
    enc, passages = training_set(config)
    trained = train(model, init_params(config, seed), enc,
                    seed=seeding.stream_seed(seed, seeding.ORDER, "fixture",
                                             str(config["train_on"])),
                    epochs=int(config["epochs"]), lr=float(config["lr"]),
                    batch_size=int(config["batch_size"]),
                    warmup_epochs=float(config["warmup_epochs"]),
                    weight_decay=float(config["weight_decay"]),
                    stop_exact=float(config["stop_exact"]), passages=passages)
    out = {f"param.{k}": v.numpy() for k, v in trained.params.items()}
    out |= {"meta.epochs": np.array(trained.epochs), "meta.exact_match":
            np.array(trained.exact_match), "meta.token_accuracy": np.array(
                trained.token_accuracy), "meta.seconds": np.array(time.perf_counter() - start)}
    return out


def params_of(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k.removeprefix("param."): torch.from_numpy(np.ascontiguousarray(v))
            for k, v in arrays.items() if k.startswith("param.")}
