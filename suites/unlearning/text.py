"""How text becomes a model's token ids: one :class:`Codec` per tokenizer and prompt format.

The mini suites and the real mode share every encoder, scorer and decoder; they differ only
in the codec. The mini codec frames a QA pair ``<bos> question: Q answer: A <eos>`` with the
corpus's word-level tokenizer (:mod:`suites.unlearning.tokenizer`); a real model's codec
(:func:`pretrained`) uses its own tokenizer, its end token, and either its chat template
or open-unlearning's plain ``Question: Q\\nAnswer: A`` tags (MUSE's, and TOFU's for a
model without a chat template).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from suites.unlearning import tokenizer as tk

PLAIN_QUESTION, PLAIN_ANSWER = "Question: ", "\nAnswer:"


@dataclass(frozen=True)
class Codec:
    """A tokenizer (``tokenizers.Tokenizer`` or a ``transformers`` tokenizer) with the ids
    that frame sequences and the prompt format. ``bos`` is None for a tokenizer that starts
    sequences with nothing (GPT-2); ``pad`` only fills the space past a sequence's end
    (every position there is outside the attention mask and the loss)."""

    tokenizer: Any
    bos: int | None
    eos: int
    pad: int
    format: str  # "mini", "plain" or "chat"

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` without any special token the tokenizer would add."""
        out = self.tokenizer.encode(text, add_special_tokens=False)
        return list(getattr(out, "ids", out))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def start(self) -> list[int]:
        return [] if self.bos is None else [self.bos]

    def prompt(self, question: str, shots: Sequence[tuple[str, str]] = ()) -> list[int]:
        """What greedy decoding continues to answer ``question``, after the in-context
        examples ``shots`` (MUSE's KnowMem prompts)."""
        if self.format == "mini":
            return [*self.start(), *self.encode(f"{tk.QUESTION} {question} {tk.ANSWER}")]
        if self.format == "chat":
            turns: list[dict[str, str]] = []
            for q, a in shots:
                turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            text = self.tokenizer.apply_chat_template(
                [*turns, {"role": "user", "content": question}], tokenize=False,
                add_generation_prompt=True)
            # the template writes the start token itself when the model wants one
            return self.encode(text)
        context = "".join(f"{PLAIN_QUESTION}{q}{PLAIN_ANSWER} {a}\n\n" for q, a in shots)
        return [*self.start(), *self.encode(f"{context}{PLAIN_QUESTION}{question}"
                                            f"{PLAIN_ANSWER}")]

    def answer(self, text: str) -> list[int]:
        """An answer's ids as they follow its prompt (a space after ``Answer:``)."""
        return self.encode(text if self.format in ("mini", "chat") else f" {text}")


def mini(tokenizer: Any) -> Codec:
    """The word-level tokenizer of the generated corpus (ids 0-2: pad, bos, eos)."""
    return Codec(tokenizer, tk.BOS, tk.EOS, tk.PAD, "mini")


def pretrained(tokenizer: Any, template: str = "auto") -> Codec:
    """A ``transformers`` tokenizer's codec. ``template``: "chat" (its chat template),
    "plain" (Question:/Answer: tags) or "auto" (chat when it has a template).

    The start token is the one the tokenizer itself puts first (Llama: yes, GPT-2: no);
    padding uses its pad token, else its end token (never attended to, never counted)."""
    if template not in ("auto", "chat", "plain"):
        raise ValueError(f"template must be auto, chat or plain, not {template!r}")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no end-of-sequence token: answers could not end")
    if template == "auto":
        template = "chat" if getattr(tokenizer, "chat_template", None) else "plain"
    if template == "chat" and not getattr(tokenizer, "chat_template", None):
        raise ValueError("template 'chat' asked for, but the tokenizer has no chat template")
    first = tokenizer("a", add_special_tokens=True)["input_ids"][:1]
    bos = tokenizer.bos_token_id if first and first[0] == tokenizer.bos_token_id else None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return Codec(tokenizer, bos, int(eos), int(pad), template)


def vocab_size(codec: Codec) -> int:
    tok = codec.tokenizer
    return int(tok.get_vocab_size(with_added_tokens=True) if hasattr(
        tok, "get_vocab_size") else len(tok))
