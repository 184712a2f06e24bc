"""Scoring each prompt once (suites/unlearning/prefixed.py) against scoring every sequence
whole (lm.score, an independent forward): the same counted tokens, argmaxes and
log-probabilities up to reordered float32 sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suites.unlearning.data import pack
from suites.unlearning.lm import score
from suites.unlearning.model import LMConfig, TinyLM
from suites.unlearning.prefixed import score_prefixed

V = 50


def _model() -> tuple[TinyLM, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = TinyLM(LMConfig(vocab_size=V, d_model=16, layers=2, heads=2, mlp=32,
                            max_length=32))
    return model, {k: v.detach().clone() for k, v in model.named_parameters()}


def _qa(prompts: list[list[int]], answers: list[list[int]]):
    return pack([[*p, *a] for p, a in zip(prompts, answers, strict=True)],
                [len(p) for p in prompts], pad=0)


def _close(a, b) -> None:
    assert np.array_equal(a.count, b.count)
    assert all(np.array_equal(x, y) for x, y in zip(a.target, b.target, strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(a.predicted, b.predicted, strict=True))
    np.testing.assert_allclose(a.logprob_sum, b.logprob_sum, rtol=1e-5, atol=1e-5)
    for x, y in zip(a.token_logprobs, b.token_logprobs, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def test_shared_prompts_give_the_whole_sequences_scores():
    model, params = _model()
    gen = np.random.default_rng(0)
    # prompts of three lengths, each shared by an answer set and two perturbed sets,
    # answers of different lengths (right padding inside a group)
    prompts = [list(gen.integers(1, V, size=n)) for n in (3, 5, 5, 7)]
    sets = [_qa(prompts, [list(gen.integers(1, V, size=n)) for n in (2, 4, 1, 6)])
            for _ in range(3)]
    new = score_prefixed(model, params, *sets)
    assert len(new) == 3 and [len(s.count) for s in new] == [4, 4, 4]
    for enc, got in zip(sets, new, strict=True):
        _close(score(model, params, enc), got)
    # a set scored alone gives what it gives among others: its prompts are the same
    (alone,) = score_prefixed(model, params, sets[1])
    _close(alone, new[1])


def test_passages_counted_from_their_first_token_and_a_one_token_prompt():
    model, params = _model()
    gen = np.random.default_rng(1)
    passages = pack([list(gen.integers(1, V, size=n)) for n in (4, 9, 2)], [1, 1, 1], pad=0)
    short = _qa([[7], [7], [8, 9]], [[3, 4, 5], [6], [2]])
    got = score_prefixed(model, params, passages, short)
    _close(score(model, params, passages), got[0])
    _close(score(model, params, short), got[1])


def test_a_row_with_nothing_counted_is_refused():
    model, params = _model()
    enc = _qa([[1, 2, 3]], [[4, 5]])
    enc.mask[0, :] = 0
    with pytest.raises(ValueError, match="counts no token"):
        score_prefixed(model, params, enc)


def test_another_model_is_scored_set_by_set():
    """A model that is not the mini one (here a wrapper, as a transformers model would be)
    goes through lm.score unchanged."""
    model, params = _model()

    class Other(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, **kw):
            return self.inner(**kw)

    sets = [_qa([[1, 2], [1, 2]], [[3, 4], [5]])]
    other = Other()
    wrapped = {f"inner.{k}": v for k, v in params.items()}
    (got,) = score_prefixed(other, wrapped, *sets)
    want = score(other, wrapped, sets[0])
    assert np.array_equal(got.logprob_sum, want.logprob_sum)
