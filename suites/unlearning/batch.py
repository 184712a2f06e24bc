"""What an ``unlearning_loss`` hook is given: a causal LM's outputs on a batch of sequences.

One :class:`LMBatch` per batch of one member, shaped the Hugging Face way: ``logits[t]``
predicts ``labels[t]``, the next input token (the labels are already shifted, so no hook
shifts again; past a sequence's end they hold the padding id 0), and ``mask`` marks the
positions the loss counts (the answer tokens and the end token; the question and the
padding are 0), i.e. where a Hugging Face label would not be -100.
``token_logprobs[t] = log softmax(logits[t])[labels[t]]`` where the mask is 1 and exactly
0 elsewhere; ``seq_logprobs = Σ_t token_logprobs[t]``, the
sequence log-likelihood of the answer, ``log π(y | x) = −ℓ(y | x)``.

The trusted trainer builds every batch from the model it trains (gradients flow through
``logits``, ``token_logprobs`` and ``seq_logprobs``) or, for the ``ref_*`` context, from
the frozen reference model (no gradient). A hook reads the fields by name:
``forget.logits``, ``retain.seq_logprobs``.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor


class LMBatch(NamedTuple):
    logits: Tensor  # [B, T, V] float
    labels: Tensor  # [B, T] int64: the next token at each position (0 = padding past the end)
    mask: Tensor  # [B, T] float 0/1: the positions the loss counts (answer + end token)
    token_logprobs: Tensor  # [B, T] float: log p(labels[t]) where mask, else 0
    seq_logprobs: Tensor  # [B] float: Σ_t token_logprobs, the answer's log-likelihood


def lm_batch(logits: Tensor, labels: Tensor, mask: Tensor) -> LMBatch:
    """The batch of ``logits [B, T, V]`` for next tokens ``labels [B, T]`` under ``mask``."""
    mask = mask.to(logits.dtype)
    logp = logits.log_softmax(dim=-1)
    token = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1) * mask
    return LMBatch(logits, labels, mask, token, token.sum(dim=-1))


def nll(batch: LMBatch) -> Tensor:
    """The Hugging Face causal-LM loss: mean negative log-likelihood over the batch's
    counted tokens (``NLL(D)`` in open-unlearning's notation)."""
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)
