"""Greedy decoding of one model's answers and continuations (the judge's ROUGE inputs)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from suites.unlearning import tokenizer as tk
from suites.unlearning.model import forward


@torch.no_grad()
def generate(model: nn.Module, params: Mapping[str, Tensor], prompts: list[list[int]],
             max_new: int) -> list[list[int]]:
    """Greedy continuations (``do_sample=False``), cut before ``<eos>``. Prompts of one
    length decode together, so no padding ever sits inside a sequence."""
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    limit = _max_length(model)
    for length, rows in sorted(by_length.items()):
        ids = torch.tensor([prompts[i] for i in rows], dtype=torch.long)
        done = torch.zeros(len(rows), dtype=torch.bool)
        for _ in range(min(max_new, limit - length)):
            logits = forward(model, dict(params), ids, torch.ones_like(ids)).logits
            nxt = logits[:, -1].argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, tk.EOS), nxt)
            done |= nxt == tk.EOS
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            if done.all():
                break
        for r, i in enumerate(rows):
            new = ids[r, length:].tolist()
            out[i] = new[:new.index(tk.EOS)] if tk.EOS in new else new
    return out


def _max_length(model: nn.Module) -> int:
    config = getattr(model, "config", None)
    return int(getattr(config, "max_length", None)
               or getattr(config, "max_position_embeddings", None) or 512)


