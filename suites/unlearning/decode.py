"""Greedy decoding of one model's answers and continuations (the judge's ROUGE inputs)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from suites.unlearning.model import forward


@torch.no_grad()
def generate(model: nn.Module, params: Mapping[str, Tensor], prompts: list[list[int]],
             max_new: int, eos: int, chunk: int = 256) -> list[list[int]]:
    """Greedy continuations (``do_sample=False``), cut before ``eos``. Prompts of one
    length decode together (at most ``chunk`` at a time), so no padding ever sits inside a
    sequence."""
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    limit = _max_length(model)
    device = next(iter(params.values())).device
    for length, same in sorted(by_length.items()):
        for lo in range(0, len(same), chunk):
            rows = same[lo:lo + chunk]
            ids = torch.tensor([prompts[i] for i in rows], dtype=torch.long, device=device)
            done = torch.zeros(len(rows), dtype=torch.bool, device=device)
            for _ in range(min(max_new, limit - length)):
                logits = forward(model, dict(params), ids, torch.ones_like(ids)).logits
                nxt = logits[:, -1].argmax(-1)
                nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
                done |= nxt == eos
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                if done.all():
                    break
            for r, i in enumerate(rows):
                new = ids[r, length:].tolist()
                out[i] = new[:new.index(eos)] if eos in new else new
    return out


def _max_length(model: nn.Module) -> int:
    """The longest sequence it takes: a Hugging Face config's ``max_position_embeddings``
    (its ``max_length`` is a generation default, 20), else the mini model's."""
    config = getattr(model, "config", None)
    return int(getattr(config, "max_position_embeddings", None)
               or getattr(config, "max_length", None) or 512)
