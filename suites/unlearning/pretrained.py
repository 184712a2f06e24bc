"""A causal LM from a local directory (the real mode): ``transformers``, never the network.

The directory is what ``save_pretrained`` (or ``huggingface-cli download``) writes: the
config, the weights and the tokenizer's files. The model runs through the same
:func:`~suites.unlearning.model.forward` as the mini model, with one member's parameters
given explicitly, so the trainer, the hook's batches and the judge do not tell them apart.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from harness.data.real import DatasetMissing
from suites.unlearning.text import Codec, pretrained


def _directory(path: str | Path, what: str) -> Path:
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise DatasetMissing(
            f"the {what} model is not in {folder}: expected a directory written by "
            f"save_pretrained (config.json, the weights, the tokenizer). Download it with "
            f"huggingface-cli download REPO --local-dir {folder}, or run with --download.")
    return folder


@lru_cache(maxsize=2)
def skeleton(path: str) -> nn.Module:
    """The model of ``path`` in eval mode (dropout off), float32; its own parameters are
    replaced by every call's (:func:`~suites.unlearning.model.forward`)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(_directory(path, "target"),
                                                 local_files_only=True,
                                                 dtype=torch.float32)
    return model.eval()


def params(path: str | Path, what: str, like: dict[str, Tensor] | None = None
           ) -> dict[str, Tensor]:
    """The parameters of the model in ``path`` (float32, CPU), checked against ``like``
    (the target's names and shapes) when given."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(_directory(path, what), local_files_only=True,
                                                 dtype=torch.float32)
    out = {k: v.detach() for k, v in model.named_parameters()}
    if like is not None:
        shapes = {k: tuple(v.shape) for k, v in like.items()}
        if {k: tuple(v.shape) for k, v in out.items()} != shapes:
            raise ValueError(f"the {what} model in {path} is not the target's architecture "
                             f"(parameter names or shapes differ)")
    return out


def codec(path: str | Path, template: str = "auto") -> Codec:
    """The tokenizer saved with the target model, framed by ``template``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_directory(path, "target"), local_files_only=True)
    return pretrained(tokenizer, template)


def describe(model: nn.Module) -> dict[str, Any]:
    """What the hook's hidden states are: the number of blocks and their width."""
    config = model.config
    return {"layers": int(config.num_hidden_layers), "width": int(config.hidden_size),
            "max_length": int(getattr(config, "max_position_embeddings", 0) or 2048)}
