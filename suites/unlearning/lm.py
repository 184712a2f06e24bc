"""What the trusted side does with one model: score sequences, decode greedily, train.

Everything here works on one member's parameters (a dict of tensors) with
:func:`suites.unlearning.model.forward`, so the same code serves the mini model and a
Hugging Face model loaded from disk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from suites.unlearning.data import Encoded
from suites.unlearning.model import TinyLM, forward

Params = Mapping[str, Tensor]


@dataclass
class Scores:
    """Teacher-forced scores of ``N`` sequences on their counted positions."""

    logprob_sum: np.ndarray  # [N] Σ log p(a_t)
    count: np.ndarray  # [N] counted tokens
    token_logprobs: list[np.ndarray]  # per item, its counted tokens' log-probabilities
    predicted: list[np.ndarray]  # per item, the argmax at its counted positions
    target: list[np.ndarray]  # per item, the counted tokens

    @property
    def normalized(self) -> np.ndarray:
        """``P̃(a|q) = exp(Σ log p / |a|)``, the length-normalised probability."""
        return np.exp(self.logprob_sum / np.maximum(self.count, 1))

    @property
    def exact(self) -> np.ndarray:
        """Per item: every counted token is the argmax (greedy decoding reproduces it)."""
        return np.array([bool((p == t).all()) for p, t in zip(self.predicted, self.target,
                                                                 strict=True)])


def _batches(groups: list[Tensor], batch_size: int, gen: torch.Generator) -> list[Tensor]:
    """One epoch's batches: each group (QA pairs, passages) shuffled and cut into batches
    of its own, the batches then shuffled together: no QA batch is padded to a passage's
    length."""
    batches = []
    for rows in groups:
        order = rows[torch.randperm(len(rows), generator=gen)]
        batches += list(order.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()
            if len(batches[i])]


def counted_logits(model: nn.Module, params: Params, ids: Tensor, attention: Tensor,
                    mask: Tensor) -> Tensor:
    """Logits at the ``mask`` positions only ``[n, V]``: the mini model applies its output
    head to those alone (half the positions of a QA pair, the last one when decoding), a
    Hugging Face model to all."""
    if isinstance(model, TinyLM):
        hidden = torch.func.functional_call(model, dict(params), (ids,), {
            "output_hidden_states": True, "return_logits": False}).hidden_states[-1]
        return _head(params, hidden[mask])
    return forward(model, dict(params), ids, attention).logits[mask]


def _head(params: Params, hidden: Tensor) -> Tensor:
    """TinyLM.head with ``params``."""
    ln = torch.nn.functional.layer_norm(hidden, hidden.shape[-1:], params["ln_f.weight"],
                                        params["ln_f.bias"])
    return ln @ params["embed.weight"].T


@torch.inference_mode()
def score(model: nn.Module, params: Params, enc: Encoded, chunk: int = 512) -> Scores:
    sums, counts, tokens, preds, targets = [], [], [], [], []
    device = next(iter(params.values())).device
    for lo in range(0, len(enc), chunk):
        attention = torch.from_numpy(enc.attention[lo:lo + chunk])
        width = int(attention.any(0).nonzero().max()) + 1  # trailing padding cut

        def part(a: np.ndarray) -> Tensor:
            return torch.from_numpy(a[lo:lo + chunk, :width]).to(device)  # noqa: B023

        ids, labels, attention = part(enc.input_ids), part(enc.labels), part(enc.attention)
        mask = part(enc.mask) > 0
        # the counted positions only, row by row (boolean indexing is row-major)
        logits = counted_logits(model, params, ids, attention, mask).float()
        target = labels[mask]
        logp = logits.log_softmax(-1).gather(-1, target[:, None]).squeeze(-1).double().cpu()
        arg, target = logits.argmax(-1).cpu(), target.cpu()
        count = mask.sum(-1).cpu()
        ends = count.cumsum(0).tolist()
        for start, end in zip([0, *ends[:-1]], ends, strict=True):
            tokens.append(logp[start:end].numpy())
            preds.append(arg[start:end].numpy())
            targets.append(target[start:end].numpy())
            sums.append(float(logp[start:end].sum()))
        counts.append(count.numpy())
    return Scores(np.array(sums, np.float64), np.concatenate(counts).astype(np.float64), tokens,
                  preds, targets)


@dataclass
class Trained:
    params: dict[str, Tensor]
    epochs: int
    exact_match: float
    token_accuracy: float


def train(model: nn.Module, params: Params, enc: Encoded, *, seed: int, epochs: int,
          lr: float, batch_size: int, warmup_epochs: float, weight_decay: float,
          stop_exact: float, passages: np.ndarray | None = None,
          step: Callable[[], None] | None = None) -> Trained:
    """Fine-tune ``params`` on ``enc`` with AdamW (linear warm-up, then constant) until
    the greedy exact match of the QA items (``passages`` marks the passage rows, which
    must reach that token accuracy instead) is ``stop_exact``, or for ``epochs``."""
    params = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    opt = torch.optim.AdamW(params.values(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    n = len(enc)
    is_passage = np.zeros(n, bool) if passages is None else passages
    steps = sum(math.ceil(int(k) / batch_size) for k in np.bincount(is_passage, minlength=2))
    warm = max(int(warmup_epochs * steps), 1)
    ids_all = torch.from_numpy(enc.input_ids)
    labels_all = torch.from_numpy(enc.labels)
    attention_all = torch.from_numpy(enc.attention)
    mask_all = torch.from_numpy(enc.mask) > 0
    done, exact, accuracy = 0, 0.0, 0.0
    groups = [torch.from_numpy(np.flatnonzero(is_passage == g)) for g in (False, True)]
    for epoch in range(epochs):
        for rows in _batches(groups, batch_size, gen):
            width = int(mask_all[rows].any(0).nonzero().max()) + 2  # trailing padding cut
            ids, labels, attention, mask = (a[rows, :width] for a in (
                ids_all, labels_all, attention_all, mask_all))
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, (done + 1) / warm)
            loss = nn.functional.cross_entropy(
                counted_logits(model, params, ids, attention, mask), labels[mask])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done += 1
            if step is not None:
                step()
        scores = score(model, params, enc)
        per_item = scores.exact
        qa = ~is_passage
        exact = float(per_item[qa].mean()) if qa.any() else 1.0
        token = [(p == t).mean() for p, t, s in zip(scores.predicted, scores.target,
                                                    is_passage, strict=True) if s]
        accuracy = float(np.mean(token)) if token else 1.0
        if exact >= stop_exact and accuracy >= stop_exact:
            return Trained({k: v.detach() for k, v in params.items()}, epoch + 1, exact,
                           accuracy)
    return Trained({k: v.detach() for k, v in params.items()}, epochs, exact, accuracy)
