"""Writes the small TOFU and MUSE files beside it, in the released formats (rerun to update).

The rows come from the generated corpus (suites/unlearning/corpus.py), cut to a few authors;
the layout and the columns are those of the Hugging Face repositories locuslab/TOFU (one
JSON-lines file per config) and muse-bench/MUSE-News (``<config>/<split>-00000-of-00001
.parquet``). suites/unlearning/tests/test_unlearning_released.py reads them.

    python suites/unlearning/tests/data/released/make.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets

from suites.unlearning import corpus as cp

HERE = Path(__file__).resolve().parent


def _tofu(c: cp.Corpus, folder: Path) -> None:
    folder.mkdir(parents=True)
    authors = [e.id for e in c.entities if e.id not in c.holdout]

    def rows(qa, perturbed: bool, paraphrase: bool = True) -> list[dict]:
        out = []
        for q in qa:
            row = {"question": q.question, "answer": q.answer}
            if perturbed:
                if paraphrase:
                    row |= {"paraphrased_question": q.question,
                            "paraphrased_answer": q.paraphrased_answer}
                row["perturbed_answer"] = list(q.perturbed_answers)
            out.append(row)
        return out

    def write(name: str, records: list[dict]) -> None:
        with (folder / f"{name}.json").open("w") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")

    forget, retain, evaluation = authors[:2], authors[2:5], authors[5:6]
    write("forget10", rows(c.qa_of(forget), False))
    write("forget10_perturbed", rows(c.qa_of(forget), True))
    write("retain90", rows(c.qa_of(retain), False))
    write("retain_perturbed", rows(c.qa_of(evaluation), True))
    write("world_facts_perturbed", rows(c.world_facts[:6], True, paraphrase=False))
    write("real_authors_perturbed", rows(c.known_entities[:6], True, paraphrase=False))


def _muse(c: cp.Corpus, folder: Path) -> None:
    trained = [e.id for e in c.entities if e.id not in c.holdout]
    forget, retain = trained[:3], trained[3:6]

    def doc(entity: int) -> str:  # an article: an author's passages one after the other
        return " ".join(p.text for p in c.passages_of([entity]))

    def write(config: str, split: str, table: dict[str, list[str]]) -> None:
        (folder / config).mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(table).to_parquet(
            str(folder / config / f"{split}-00000-of-00001.parquet"))

    write("raw", "forget", {"text": [doc(e) for e in forget]})
    write("raw", "retain1", {"text": [doc(e) for e in retain]})
    openings = [p.text.split() for p in c.passages_of(forget)][:4]
    write("verbmem", "forget", {"prompt": [" ".join(w[:12]) for w in openings],
                                "gt": [" ".join(w[12:40]) for w in openings]})
    for split, entities in (("forget_qa", forget), ("retain_qa", retain)):
        qa = list(c.qa_of(entities))[:10]
        write("knowmem", split, {"question": [q.question for q in qa],
                                 "answer": [q.answer for q in qa]})
        shots = list(c.qa_of(entities))[10:12]
        write("knowmem", f"{split}_icl", {"question": [q.question for q in shots],
                                          "answer": [q.answer for q in shots]})
    write("privleak", "forget", {"text": [p.text for p in c.passages_of(forget)][:4]})
    write("privleak", "holdout", {"text": [p.text for p in c.passages_of(c.holdout)][:4]})


def main() -> None:
    c = cp.generate(0)
    for name, writer in (("tofu", _tofu), ("muse-news", _muse)):
        shutil.rmtree(HERE / name, ignore_errors=True)
        writer(c, HERE / name)


if __name__ == "__main__":
    main()
