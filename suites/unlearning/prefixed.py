"""Teacher-forced scores of question-answer sets whose sequences share their question.

A TOFU split is scored three times over the same questions: the answer, the paraphrased
answer and five perturbed answers per question, 7 sequences of about 23 tokens of which
the first 12 (``<bos> question: Q answer:``) are the same. :func:`score_prefixed` runs
each distinct prompt through the mini model once, keeps its keys and values, and runs only
the answers after it (as greedy decoding does with its cache): 45% of the positions
:func:`suites.unlearning.lm.score` runs, for the same :class:`~suites.unlearning.lm.Scores`
(bench/unlearning_judge.py times both and compares every stored number).

It lives beside ``lm.py`` rather than in it because ``lm.py`` is in the fixtures' key: a
change there would rebuild every fixture model. A model other than
:class:`~suites.unlearning.model.TinyLM` (a ``transformers`` model loaded from disk) is
scored set by set with :func:`~suites.unlearning.lm.score`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from suites.unlearning.data import Encoded
from suites.unlearning.lm import Scores, _head, score
from suites.unlearning.model import TinyLM


@torch.inference_mode()
def score_prefixed(model: nn.Module, params: Mapping[str, Tensor], *sets: Encoded,
                   chunk: int = 512) -> tuple[Scores, ...]:
    """Each set's scores, as :func:`~suites.unlearning.lm.score` gives them. A row's
    prompt is every token before its first counted position; rows of any set with the same
    prompt share its one forward."""
    if not isinstance(model, TinyLM):
        return tuple(score(model, params, enc, chunk) for enc in sets)
    rows = [(s, i) for s, enc in enumerate(sets) for i in range(len(enc))]
    prompts: dict[tuple[int, ...], int] = {}
    prompt_of, spans = [], []
    for s, i in rows:
        enc = sets[s]
        counted = np.flatnonzero(enc.mask[i] > 0)
        if not len(counted):
            raise ValueError(f"set {s} row {i} counts no token")
        first, last = int(counted[0]), int(counted[-1])
        prompt_of.append(prompts.setdefault(tuple(enc.input_ids[i, :first].tolist()),
                                            len(prompts)))
        spans.append((first, last + 1))
    device = next(iter(params.values())).device
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [None] * len(rows)  # type: ignore
    by_length: dict[int, list[int]] = {}
    for r in range(len(rows)):
        by_length.setdefault(spans[r][0], []).append(r)
    keys = list(prompts)
    for length, members in sorted(by_length.items()):
        used = sorted({prompt_of[r] for r in members})
        cache = _prompt_cache(model, params, [keys[p] for p in used], device, chunk)
        where = {p: k for k, p in enumerate(used)}
        for lo in range(0, len(members), chunk):
            part = members[lo:lo + chunk]
            past = None
            if length:
                idx = torch.tensor([where[prompt_of[r]] for r in part], device=device)
                past = tuple((k[idx], v[idx]) for k, v in cache)
            for r, result in zip(part, _answers(model, params, sets, rows, spans, part, past,
                                                device), strict=True):
                out[r] = result
    results, at = [], 0
    for enc in sets:
        mine = out[at:at + len(enc)]
        at += len(enc)
        tokens = [t for t, _, _ in mine]
        results.append(Scores(np.array([float(t.sum()) for t in tokens], np.float64),
                              np.array([len(t) for t in tokens], np.float64), tokens,
                              [p for _, p, _ in mine], [g for _, _, g in mine]))
    return tuple(results)


def _prompt_cache(model: nn.Module, params: Mapping[str, Tensor], prompts: list[tuple[int, ...]],
                  device: torch.device, chunk: int) -> list[tuple[Tensor, Tensor]]:
    """Per block, the keys and values of every position of ``prompts`` (one length)."""
    if not prompts[0]:
        return []
    parts = []
    for lo in range(0, len(prompts), chunk):
        ids = torch.tensor(prompts[lo:lo + chunk], dtype=torch.long, device=device)
        parts.append(torch.func.functional_call(model, dict(params), (ids,), {
            "return_logits": False, "use_cache": True}).past_key_values)
    return [(torch.cat([p[b][0] for p in parts]), torch.cat([p[b][1] for p in parts]))
            for b in range(len(parts[0]))]


def _answers(model: nn.Module, params: Mapping[str, Tensor], sets: tuple[Encoded, ...],
             rows: list[tuple[int, int]], spans: list[tuple[int, int]], part: list[int],
             past: tuple[tuple[Tensor, Tensor], ...] | None, device: torch.device
             ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each row's counted log-probabilities, argmaxes and targets, from its positions after
    the prompt (right-padded: the causal mask keeps the pads out of every real position)."""
    width = max(spans[r][1] - spans[r][0] for r in part)
    n = len(part)
    ids = np.zeros((n, width), np.int64)
    labels = np.zeros((n, width), np.int64)
    mask = np.zeros((n, width), bool)
    for j, r in enumerate(part):
        s, i = rows[r]
        a, b = spans[r]
        ids[j, :b - a] = sets[s].input_ids[i, a:b]
        labels[j, :b - a] = sets[s].labels[i, a:b]
        mask[j, :b - a] = sets[s].mask[i, a:b] > 0
    ids_t, mask_t = torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
    hidden = torch.func.functional_call(model, dict(params), (ids_t,), {
        "output_hidden_states": True, "return_logits": False,
        "past_key_values": past}).hidden_states[-1]
    logits = _head(params, hidden[mask_t]).float()
    target = torch.from_numpy(labels).to(device)[mask_t]
    logp = logits.log_softmax(-1).gather(-1, target[:, None]).squeeze(-1).double().cpu()
    cuts = mask.sum(-1).cumsum()[:-1]  # one split of each array, not a tensor per row
    return list(zip(*(np.split(x.numpy(), cuts) for x in (
        logp, logits.argmax(-1).cpu(), target.cpu())), strict=True))
