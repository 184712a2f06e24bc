"""Sequences as the model sees them: question-answer pairs and passages, encoded.

A QA pair is ``<bos> question: Q answer: A <eos>``; the loss counts the answer and the end
token (Hugging Face labels would be -100 on the question). A passage is ``<bos> TEXT
<eos>``, every token counted. Sequences are right-padded with ``<pad>`` (id 0) to the
longest of their set; ``labels[t]`` is the input token at ``t + 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suites.unlearning import tokenizer as tk

QUESTION, ANSWER = "question:", "answer:"


@dataclass(frozen=True)
class Encoded:
    """``N`` sequences: inputs, next-token labels and the counted positions, ``[N, T]``."""

    input_ids: np.ndarray  # int64
    labels: np.ndarray  # int64
    mask: np.ndarray  # float32 0/1

    def __len__(self) -> int:
        return len(self.input_ids)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.input_ids": self.input_ids, f"{prefix}.labels": self.labels,
                f"{prefix}.mask": self.mask}

    def take(self, rows: Sequence[int] | np.ndarray) -> Encoded:
        rows = np.asarray(rows, dtype=np.int64)
        return Encoded(self.input_ids[rows], self.labels[rows], self.mask[rows])


def _pack(sequences: list[list[int]], starts: list[int]) -> Encoded:
    """Sequences padded to one length; positions from ``starts[i]`` (the first predicted
    token counted) to the end token counted."""
    length = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), length), np.int64)
    mask = np.zeros((len(sequences), length), np.float32)
    for i, (s, start) in enumerate(zip(sequences, starts, strict=True)):
        ids[i, :len(s)] = s
        mask[i, start - 1:len(s) - 1] = 1.0  # position t predicts token t + 1
    labels = np.zeros_like(ids)
    labels[:, :-1] = ids[:, 1:]
    return Encoded(ids, labels, mask)


def prompt_ids(tokenizer: object, question: str) -> list[int]:
    """``<bos> question: Q answer:``: what greedy decoding continues."""
    return [tk.BOS, *tk.encode(tokenizer, f"{QUESTION} {question} {ANSWER}")]


def encode_qa(tokenizer: object, questions: Sequence[str], answers: Sequence[str]) -> Encoded:
    seqs, starts = [], []
    for q, a in zip(questions, answers, strict=True):
        prompt = prompt_ids(tokenizer, q)
        seqs.append([*prompt, *tk.encode(tokenizer, a), tk.EOS])
        starts.append(len(prompt))
    return _pack(seqs, starts)


def encode_passages(tokenizer: object, texts: Sequence[str]) -> Encoded:
    seqs = [[tk.BOS, *tk.encode(tokenizer, t), tk.EOS] for t in texts]
    return _pack(seqs, [1] * len(seqs))


def concat(*parts: Encoded) -> Encoded:
    """Sets of different lengths as one, padded to the longest."""
    length = max(p.input_ids.shape[1] for p in parts)

    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, length - a.shape[1])))

    return Encoded(*(np.concatenate([pad(getattr(p, f)) for p in parts])
                     for f in ("input_ids", "labels", "mask")))
