"""Sequences as the model sees them: question-answer pairs and passages, encoded.

A QA pair is its prompt (:meth:`Codec.prompt`: ``<bos> question: Q answer:`` for the mini
model) followed by the answer and the end token; the loss counts the answer and the end
token (Hugging Face labels would be -100 on the prompt). A passage is ``<bos> TEXT <eos>``,
every token counted. Sequences are right-padded with the codec's pad id to the longest of
their set; ``attention`` marks the real tokens, ``labels[t]`` is the input token at
``t + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suites.unlearning.text import Codec

FIELDS = ("input_ids", "labels", "mask", "attention")


@dataclass(frozen=True)
class Encoded:
    """``N`` sequences: inputs, next-token labels, the counted positions and the real
    tokens (the attention mask), ``[N, T]``."""

    input_ids: np.ndarray  # int64
    labels: np.ndarray  # int64
    mask: np.ndarray  # float32 0/1
    attention: np.ndarray  # int64 0/1

    def __len__(self) -> int:
        return len(self.input_ids)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{f}": getattr(self, f) for f in FIELDS}


def pack(sequences: list[list[int]], starts: list[int], pad: int) -> Encoded:
    """Sequences padded with ``pad`` to one length; positions from ``starts[i]`` (the first
    predicted token counted) to the last token counted."""
    length = max(len(s) for s in sequences)
    ids = np.full((len(sequences), length), pad, np.int64)
    mask = np.zeros((len(sequences), length), np.float32)
    attention = np.zeros((len(sequences), length), np.int64)
    for i, (s, start) in enumerate(zip(sequences, starts, strict=True)):
        ids[i, :len(s)] = s
        attention[i, :len(s)] = 1
        mask[i, start - 1:len(s) - 1] = 1.0  # position t predicts token t + 1
    labels = np.full_like(ids, pad)
    labels[:, :-1] = ids[:, 1:]
    return Encoded(ids, labels, mask, attention)


def encode_qa(codec: Codec, questions: Sequence[str], answers: Sequence[str]) -> Encoded:
    seqs, starts = [], []
    for q, a in zip(questions, answers, strict=True):
        prompt = codec.prompt(q)
        seqs.append([*prompt, *codec.answer(a), codec.eos])
        starts.append(len(prompt))
    return pack(seqs, starts, codec.pad)


def encode_passages(codec: Codec, texts: Sequence[str], limit: int | None = None) -> Encoded:
    """Every text whole, or its first tokens up to ``limit`` in all (no end token then)."""
    seqs = []
    for t in texts:
        seq = [*codec.start(), *codec.encode(t), codec.eos]
        seqs.append(seq if limit is None or len(seq) <= limit else seq[:limit])
    return pack(seqs, [1] * len(seqs), codec.pad)


def encode_chunks(codec: Codec, texts: Sequence[str], length: int) -> Encoded:
    """Long documents cut into windows of at most ``length`` tokens (the start token
    included), every window a passage of its own: MUSE trains on its corpus this way."""
    seqs = []
    room = length - len(codec.start())
    for t in texts:
        ids = codec.encode(t)
        seqs += [[*codec.start(), *ids[i:i + room]] for i in range(0, len(ids), room)]
    return pack(seqs, [1] * len(seqs), codec.pad)


def concat(*parts: Encoded, pad: int) -> Encoded:
    """Sets of different lengths as one, padded to the longest."""
    length = max(p.input_ids.shape[1] for p in parts)

    def widen(a: np.ndarray, value: int) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, length - a.shape[1])), constant_values=value)

    return Encoded(*(np.concatenate([widen(getattr(p, f), pad if f in ("input_ids", "labels")
                                           else 0) for p in parts])
                     for f in FIELDS))
