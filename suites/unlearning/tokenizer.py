"""A word-level tokenizer over the unlearning corpus (:mod:`suites.unlearning.corpus`).

The corpus is already normalised (lower case, punctuation as separate words), so a
whitespace split is the whole tokenization and decoding joins with spaces: the tokenizer has
no normalizer and no decoder (``tokenizers`` then joins with " "), and ``decode(encode(t))
== t`` for every corpus text. Ids: the specials 0-3, the QA markers 4-5, then the corpus
words in sorted order, so the same corpus gives the same ids everywhere. ``to_str()`` is a
``tokenizer.json`` that ``transformers.PreTrainedTokenizerFast`` loads.
"""

from __future__ import annotations

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from suites.unlearning.corpus import Corpus

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD, BOS, EOS, UNK = range(4)
QUESTION, ANSWER = "question:", "answer:"  # ordinary words: `question: Q answer: A`
MARKERS = (QUESTION, ANSWER)


def build(corpus: Corpus) -> Tokenizer:
    """The tokenizer whose vocabulary is every word of ``corpus.texts()``."""
    words = sorted({w for text in corpus.texts() for w in text.split()} - {*SPECIALS, *MARKERS})
    vocab = {w: i for i, w in enumerate((*SPECIALS, *MARKERS, *words))}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    tokenizer.add_special_tokens(list(SPECIALS))  # keep their ids; skipped when decoding
    return tokenizer


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """The word ids of ``text``, without <bos>/<eos> (callers frame sequences)."""
    return tokenizer.encode(text, add_special_tokens=False).ids


def decode(tokenizer: Tokenizer, ids: list[int]) -> str:
    """The words of ``ids`` joined by spaces, specials skipped."""
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def vocab_size(tokenizer: Tokenizer) -> int:
    return tokenizer.get_vocab_size(with_added_tokens=True)
