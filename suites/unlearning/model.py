"""The small causal language model of the mini suites, and one forward for any causal LM.

:class:`TinyLM` is a GPT-style decoder (learned positions, pre-LayerNorm blocks of causal
multi-head attention and a GELU MLP, the output head tied to the token embedding) that
answers like a Hugging Face ``*ForCausalLM``: ``model(input_ids=…, output_hidden_states=
True)`` returns ``.logits`` and ``.hidden_states`` (the embeddings, then every block's
output). It is written for ``torch.func.vmap`` over stacked members (no data-dependent
control flow), which is why the mini suites use it rather than a ``transformers`` class
instantiated from a config: bench/unlearning_model.py measures both on the same batches
(the figures are in suites/unlearning_tofu/README.md). A real model loaded with
``transformers`` goes through the same :func:`forward` (members in a loop).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class LMConfig:
    vocab_size: int
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    mlp: int = 256
    max_length: int = 128

    def to_json(self) -> dict[str, int]:
        return asdict(self)


Cache = tuple[tuple[Tensor, Tensor], ...]  # per block: keys and values [B, H, T, D/H]


class Output(NamedTuple):
    logits: Tensor  # [B, T, V]
    hidden_states: tuple[Tensor, ...]  # layers + 1 of [B, T, D]
    past_key_values: Cache | None = None  # with use_cache: every position's keys and values


class Block(nn.Module):
    def __init__(self, c: LMConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.up = nn.Linear(c.d_model, c.mlp)
        self.down = nn.Linear(c.mlp, c.d_model)

    def forward(self, x: Tensor, causal: Tensor, past: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """The block's output for the new positions ``x`` (after ``past``'s keys and
        values when decoding), and the keys and values of every position so far."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        # Written out rather than F.scaled_dot_product_attention: the same numbers under
        # vmap and in a loop, on every backend.
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~causal, float("-inf"))
        att = scores.softmax(dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)))), (k, v)


class TinyLM(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.max_length, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation: N(0, 0.02), residual projections scaled by depth."""
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * self.config.layers) if name.endswith(
                    ("proj.weight", "down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                output_hidden_states: bool = False, return_logits: bool = True,
                past_key_values: Cache | None = None, use_cache: bool = False,
                **_: Any) -> Output:
        """As a Hugging Face causal LM: ``use_cache`` also returns every position's keys and
        values, which a later call given them as ``past_key_values`` continues from (greedy
        decoding feeds one new token at a time)."""
        # Right padding only: the causal mask keeps every real token from seeing the pads
        # after it, so the attention mask is not needed (accepted for the HF signature).
        t = input_ids.shape[-1]
        start = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        positions = torch.arange(start, start + t, device=input_ids.device)
        x = self.embed(input_ids) + self.position(positions)
        causal = torch.ones(t, start + t, dtype=torch.bool,
                            device=input_ids.device).tril(diagonal=start)
        hidden, cache = [x], []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, causal, None if past_key_values is None else past_key_values[i])
            hidden.append(x)
            cache.append(kv)
        # return_logits=False: a caller that needs the logits of a few positions only
        return Output(self.head(x) if return_logits else x.new_empty(0), tuple(hidden),
                      tuple(cache) if use_cache else None)

    def head(self, hidden: Tensor) -> Tensor:
        """Logits from the last block's output (tied to the token embedding): training
        calls it on the counted positions only."""
        return self.ln_f(hidden) @ self.embed.weight.T


def parameters_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def forward(model: nn.Module, params: dict[str, Tensor], input_ids: Tensor,
            attention_mask: Tensor) -> Output:
    """``model`` run with ``params`` (one member's) as a Hugging Face causal LM is run."""
    out = torch.func.functional_call(model, params, (), {
        "input_ids": input_ids, "attention_mask": attention_mask,
        "output_hidden_states": True})
    return Output(out.logits, tuple(out.hidden_states))
