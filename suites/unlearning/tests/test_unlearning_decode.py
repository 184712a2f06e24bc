"""Greedy decoding of the mini model (suites/unlearning/decode.py): its cached path, which
runs the output head on the newest position only and drops the rows that have finished,
gives the tokens of recomputing the whole prefix at every step (an independent loop)."""

from __future__ import annotations

import torch

from suites.unlearning.decode import generate
from suites.unlearning.model import LMConfig, TinyLM

V = 12


def test_cached_mini_decoding_gives_the_tokens_of_the_whole_prefix():
    torch.manual_seed(0)
    model = TinyLM(LMConfig(vocab_size=V, d_model=16, layers=2, heads=2, mlp=32,
                            max_length=40))
    params = {k: v.detach() * (1 if v.dim() == 1 else 40) for k, v in model.named_parameters()}
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, V, (n,), generator=gen).tolist()
               for n in (3, 3, 3, 3, 5, 5, 5, 7, 7, 3, 5, 7)]
    never = generate(model, params, prompts, 16, eos=-1, cache=False)
    # an end token that rows reach at different steps, and some never
    firsts = {t: [row.index(t) if t in row else None for row in never] for t in range(V)}
    eos = max(firsts, key=lambda t: (None in firsts[t]) * len(set(firsts[t])))
    cached = generate(model, params, prompts, 16, eos, chunk=4)
    assert cached == generate(model, params, prompts, 16, eos, cache=False)
    assert len({len(c) for c in cached}) >= 3 and any(len(c) == 16 for c in cached)
