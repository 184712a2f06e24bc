"""The unlearning corpus (suites/unlearning/corpus.py) and its word-level tokenizer: the same
corpus everywhere, TOFU's structure (counts, nested splits, perturbed answers of the right
kind), surnames that belong to one author only, and a tokenizer that covers every word."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from suites.unlearning import corpus as cp
from suites.unlearning import tokenizer as tk

# Changes when anything in generate(0) changes, here or on another machine/Python/numpy.
CORPUS_SHA256 = "2f8e31bcd0ab3b6d4cd8ef9f2961427d9c42e0c042714d09ed2ba954bf54127b"
VOCAB_SIZE = 991


@pytest.fixture(scope="module")
def corpus() -> cp.Corpus:
    return cp.generate(0)


@pytest.fixture(scope="module")
def tok(corpus) -> Tokenizer:
    return tk.build(corpus)


def words(text: str) -> list[str]:
    return text.split()


def all_qa(c: cp.Corpus) -> tuple[cp.QA, ...]:
    return (*c.qa, *c.world_facts, *c.known_entities)


# --- determinism ----------------------------------------------------------------------------

def test_generate_is_deterministic_and_pinned(corpus):
    again = cp.generate(0)
    assert again == corpus
    assert again.sha256() == corpus.sha256() == CORPUS_SHA256
    assert cp.generate(1).sha256() != CORPUS_SHA256


def test_the_corpus_does_not_depend_on_pythons_string_hash():
    code = "from suites.unlearning import corpus; print(corpus.generate(0).sha256())"
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, cwd=Path(__file__).parents[3])
        assert out.stdout.strip() == CORPUS_SHA256


def test_generation_is_fast():
    start = time.perf_counter()
    cp.generate(3)
    assert time.perf_counter() - start < 5.0  # ~0.2 s; a tenfold regression fails


# --- entities, QA and passages ----------------------------------------------------------------

def test_counts(corpus):
    assert [e.id for e in corpus.entities] == list(range(130))
    assert corpus.trained == tuple(range(100)) and corpus.holdout == tuple(range(100, 130))
    assert len(corpus.qa) == 130 * 20 and len(corpus.passages) == 130 * 3
    for e in corpus.entities:
        assert list(e.attributes) == [a.name for a in cp.ATTRIBUTES]
        qa = corpus.qa_of([e.id])
        assert len(qa) == 20 and {q.entity for q in qa} == {e.id}
        assert [q.attribute for q in qa] == [a.name for a in cp.ATTRIBUTES for _ in (0, 1)]
        assert [p.index for p in corpus.passages_of([e.id])] == [0, 1, 2]
    assert all(len(q.perturbed_answers) == 5 for q in all_qa(corpus))
    assert 90 <= len(corpus.world_facts) <= 110 and 90 <= len(corpus.known_entities) <= 110
    assert {q.entity for q in corpus.world_facts} == {cp.WORLD_ENTITY}
    assert {q.entity for q in corpus.known_entities} == {cp.KNOWN_ENTITY}
    assert 8 <= len(corpus.idk_answers) == len(set(corpus.idk_answers)) <= 12


def test_attribute_values_are_short_and_of_their_kind(corpus):
    for e in corpus.entities:
        for a in cp.ATTRIBUTES:
            assert e.attributes[a.name] in corpus.values[a.name]
            assert 1 <= len(words(e.attributes[a.name])) <= 4
        assert e.attributes["father_job"] != e.attributes["mother_job"]
        assert e.attributes["first_book"] != e.attributes["second_book"]
    titles = [e.attributes[k] for e in corpus.entities for k in ("first_book", "second_book")]
    assert len(set(titles)) == len(titles)


def test_no_value_hides_inside_another_value_or_a_template():
    """So a value found in a text is that fact, never part of another one or of filler."""
    values = sorted({v for a in cp.ATTRIBUTES if a.name != "birth_year" for v in a.pool})
    templates = [t for passage in cp.PASSAGES for slot in passage for t in slot]
    templates += [t for a in cp.ATTRIBUTES for t in (*a.questions, *a.answers)]
    templates += [t for q, answers in (*cp.WORLD_TEMPLATES.values(),
                                       *cp.KNOWN_TEMPLATES.values()) for t in (q, *answers)]
    for v in values:
        for text in (*values, *templates, *cp.IDK_ANSWERS):
            assert text == v or f" {v} " not in f" {text} ", (v, text)


def test_questions_name_the_entity_and_answers_state_its_value(corpus):
    by_id = {e.id: e for e in corpus.entities}
    templates = {a.name: a for a in cp.ATTRIBUTES}
    for i, q in enumerate(corpus.qa):
        e, a, k = by_id[q.entity], templates[q.attribute], i % 2
        value = e.attributes[q.attribute]
        assert q.question == a.questions[k].format(name=e.name)
        assert q.answer == a.answers[k].format(name=e.name, value=value)
        assert q.paraphrased_answer == a.answers[1 - k].format(name=e.name, value=value)
        assert q.answer != q.paraphrased_answer
        assert f" {e.name} " in f" {q.question} "
    lengths = [len(words(q.answer)) for q in corpus.qa]
    assert min(lengths) >= 6 and max(lengths) <= 14 and 8 <= np.mean(lengths) <= 12


def test_perturbed_answers_are_wrong_values_of_the_same_kind(corpus):
    templates = {a.name: a for a in cp.ATTRIBUTES}
    by_id = {e.id: e for e in corpus.entities}
    for i, q in enumerate(corpus.qa):
        e, k = by_id[q.entity], i % 2
        prefix, suffix = templates[q.attribute].answers[1 - k].format(
            name=e.name, value="\0").split("\0")
        wrong = []
        for p in q.perturbed_answers:
            assert p.startswith(prefix) and p.endswith(suffix)
            wrong.append(p[len(prefix):len(p) - len(suffix)])
        assert set(wrong) <= set(corpus.values[q.attribute])
        assert e.attributes[q.attribute] not in wrong
        assert len(set(wrong)) == 5


def test_perturbed_answers_differ_from_the_paraphrase_and_each_other(corpus):
    for q in all_qa(corpus):
        assert len(set(q.perturbed_answers)) == 5
        assert q.paraphrased_answer not in q.perturbed_answers
        assert q.answer not in q.perturbed_answers


def test_world_fact_arithmetic_is_right_and_its_perturbations_wrong(corpus):
    arithmetic = [q for q in corpus.world_facts if q.attribute in ("sum", "product")]
    assert len(arithmetic) == 50
    for q in arithmetic:
        _, _, a, op, b, _ = words(q.question)
        truth = int(a) + int(b) if op == "plus" else int(a) * int(b)
        assert int(words(q.answer)[-2]) == int(words(q.paraphrased_answer)[-2]) == truth
        assert all(int(words(p)[-2]) != truth for p in q.perturbed_answers)


def test_utility_splits_state_one_value_per_fact(corpus):
    # a capital, sea, range or country stays the same fact across answer and paraphrase
    for q in (*corpus.world_facts, *corpus.known_entities):
        assert set(words(q.answer)) & set(words(q.paraphrased_answer)) - {".", "the"}
        assert len(set(q.perturbed_answers)) == 5
    capitals = [words(q.answer)[-2] for q in corpus.world_facts if q.attribute == "capital"]
    assert len(set(capitals)) == len(capitals) == 50


def test_surnames_are_unique_and_appear_only_in_their_authors_texts(corpus):
    surnames = [e.surname for e in corpus.entities]
    assert len(set(surnames)) == 130
    assert all(len(words(s)) == 1 and e.name.endswith(f" {s}")
               for s, e in zip(surnames, corpus.entities, strict=True))
    owners: dict[str, set[int]] = defaultdict(set)  # word -> entity ids whose texts hold it
    for q in all_qa(corpus):
        for text in (q.question, q.answer, q.paraphrased_answer, *q.perturbed_answers):
            for w in words(text):
                owners[w].add(q.entity)
    for p in corpus.passages:
        for w in words(p.text):
            owners[w].add(p.entity)
    for text in (*corpus.idk_answers, *(v for vs in corpus.values.values() for v in vs),
                 *cp.FIRST_NAMES):
        for w in words(text):
            owners[w].add(-99)
    for e in corpus.entities:
        assert owners[e.surname] == {e.id}, e.surname


def test_passages_are_muse_sized_and_state_the_authors_facts(corpus):
    lengths = [len(words(p.text)) for p in corpus.passages]
    assert 70 <= np.mean(lengths) <= 85 and min(lengths) >= 50 and max(lengths) <= 110
    assert len({p.text for p in corpus.passages}) == len(corpus.passages)
    # no value of another author's kind slips in: each passage states only its author's facts
    for e in corpus.entities:
        texts = [f" {p.text} " for p in corpus.passages_of([e.id])]
        assert all(f" {e.surname} " in t for t in texts)
        for a in cp.ATTRIBUTES:
            assert any(f" {e.attributes[a.name]} " in t for t in texts), a.name
        own = set(e.attributes.values())
        for name in corpus.values:
            for v in corpus.values[name]:
                assert v in own or all(f" {v} " not in t for t in texts), (e.id, v)


def test_splits_are_nested_and_disjoint(corpus):
    f5, f10 = (set(corpus.forget_splits[k]) for k in (5, 10))
    assert len(f5) == 5 and len(f10) == 10
    assert f5 < f10 < set(corpus.trained)
    assert set(corpus.holdout).isdisjoint(corpus.trained)
    for k in (5, 10):
        retain = corpus.retain_eval[k]
        assert len(set(retain)) == 20 and set(retain) <= set(corpus.trained)
        assert set(retain).isdisjoint(f10)
        assert len(corpus.qa_of(retain)) == 400
    assert cp.generate(1).forget_splits != corpus.forget_splits


def test_qa_of_and_passages_of_select_in_corpus_order(corpus):
    qa = corpus.qa_of([7, 3])
    assert [q.entity for q in qa] == [3] * 20 + [7] * 20
    assert corpus.passages_of(corpus.holdout) == corpus.passages[300:]
    assert corpus.qa_of([]) == ()


def test_text_is_normalised(corpus):
    for text in corpus.texts():
        assert text == text.lower() and text == " ".join(words(text))
        for w in words(text):
            assert w.isalnum() or w in {".", ",", "?", "'s"}, w


# --- tokenizer -------------------------------------------------------------------------------

def test_specials_and_markers_have_fixed_ids(tok):
    assert [tok.token_to_id(s) for s in tk.SPECIALS] == [tk.PAD, tk.BOS, tk.EOS, tk.UNK]
    assert (tk.PAD, tk.BOS, tk.EOS, tk.UNK) == (0, 1, 2, 3)
    assert [tok.token_to_id(m) for m in (tk.QUESTION, tk.ANSWER)] == [4, 5]


def test_vocabulary_covers_the_corpus_and_round_trips(corpus, tok):
    size = tk.vocab_size(tok)
    print(f"vocabulary: {size} words")
    assert size == VOCAB_SIZE and 300 <= size < 3000
    for text in corpus.texts():
        ids = tk.encode(tok, text)
        assert tk.UNK not in ids and len(ids) == len(words(text))
        assert tk.decode(tok, ids) == text
    qa = corpus.qa[0]
    ids = tk.encode(tok, f"{tk.QUESTION} {qa.question} {tk.ANSWER} {qa.answer}")
    assert tk.decode(tok, [tk.BOS, *ids, tk.EOS, tk.PAD]) == (
        f"{tk.QUESTION} {qa.question} {tk.ANSWER} {qa.answer}")
    assert tk.encode(tok, "zebra") == [tk.UNK]


def test_vocabulary_ids_are_sorted_words_and_deterministic(corpus, tok):
    vocab = tok.get_vocab()
    order = sorted(vocab, key=vocab.get)
    assert order[6:] == sorted(order[6:])
    assert tk.build(cp.generate(0)).to_str() == tok.to_str()


def test_tokenizer_json_loads_in_transformers(corpus, tok, tmp_path):
    from transformers import PreTrainedTokenizerFast

    path = tmp_path / "tokenizer.json"
    path.write_text(tok.to_str())
    hf = PreTrainedTokenizerFast(tokenizer_file=str(path), pad_token="<pad>", bos_token="<bos>",
                                 eos_token="<eos>", unk_token="<unk>",
                                 clean_up_tokenization_spaces=False)
    assert (hf.pad_token_id, hf.bos_token_id, hf.eos_token_id, hf.unk_token_id) == (0, 1, 2, 3)
    assert len(hf) == tk.vocab_size(tok)
    same = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tok.to_str()))
    for text in (corpus.qa[5].answer, corpus.passages[9].text, corpus.world_facts[0].question):
        ids = hf(text, add_special_tokens=False)["input_ids"]
        assert ids == tk.encode(tok, text) == same(text, add_special_tokens=False)["input_ids"]
        assert hf.decode([tk.BOS, *ids, tk.EOS], skip_special_tokens=True) == text
