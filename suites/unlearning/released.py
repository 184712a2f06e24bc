"""Readers of the released TOFU and MUSE datasets (the real mode), from a local folder.

Read with ``datasets`` from the files of the Hugging Face dataset repositories, never
from the network (:func:`fetch` downloads a repository only when the user asks):

* TOFU (``locuslab/TOFU``): one file per config, ``<name>.json`` (JSON lines) or
  ``<name>/*.parquet``. ``forget10`` / ``retain90`` (question, answer) are what unlearning
  trains on; ``forget10_perturbed`` and ``retain_perturbed`` add ``paraphrased_answer`` and
  ``perturbed_answer`` (a list), and the same question-answer pairs as ``forget10``, so
  unlearning trains on those; ``world_facts_perturbed`` and ``real_authors_perturbed``
  hold ``answer`` and ``perturbed_answer``. Every author has 20 consecutive rows.
* MUSE (``muse-bench/MUSE-News``, ``MUSE-Books``): ``<config>/<split>-*.parquet`` (or
  ``.json``): ``raw/forget`` and ``raw/retain1`` (text) to train on, ``verbmem/forget``
  (prompt, gt), ``knowmem/{forget,retain}_qa`` and ``*_qa_icl`` (question, answer),
  ``privleak/{forget,holdout}`` (text).

Records become the generated corpus's :class:`~suites.unlearning.corpus.QA`, so the judge
runs one code path on both. ``attribute`` groups the relearning attack's questions: the
position of a question among its author's 20 (TOFU) or its row (MUSE).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.real import DatasetMissing
from suites.unlearning.corpus import QA

TOFU_REPO, MUSE_REPOS = "locuslab/TOFU", {"news": "muse-bench/MUSE-News",
                                         "books": "muse-bench/MUSE-Books"}
PER_AUTHOR = 20  # TOFU: 20 questions per author, in consecutive rows
TOFU_RETAIN = {1: "retain99", 5: "retain95", 10: "retain90"}
# "I don't know" answers for IdkNLL/IdkDPO on real models (open-unlearning ships 100 of
# the kind in data/idk.jsonl; these 10 are ours).
IDK = ("I don't know.", "I'm not sure about that.", "I have no information about that.",
       "I can't answer that question.", "That is not something I know.", "I have no idea.",
       "I don't have that information.", "Sorry, I don't know.",
       "I'm afraid I can't help with that.", "I've never heard of that.")


@dataclass(frozen=True)
class Tofu:
    forget: list[QA]  # forgetNN_perturbed: the forget QA with paraphrases and perturbations
    retain_train: list[QA]  # retainNN: what the regulariser draws from
    retain_eval: list[QA]  # retain_perturbed
    world_facts: list[QA]
    real_authors: list[QA]


@dataclass(frozen=True)
class Muse:
    forget_texts: list[str]  # raw/forget
    retain_texts: list[str]  # raw/retain1
    verbmem: list[tuple[str, str]]  # (prompt, ground-truth continuation)
    forget_qa: list[QA]
    retain_qa: list[QA]
    forget_shots: list[tuple[str, str]]  # in-context examples of KnowMem's prompts
    retain_shots: list[tuple[str, str]]
    privleak_forget: list[str]
    privleak_holdout: list[str]


def _files(folder: Path, name: str) -> tuple[str, list[str]]:
    """The files of one config or split: ``name.json``/``.jsonl``/``.parquet`` or every
    parquet/JSON file of ``name/`` or ``name-*.parquet`` (the Hub's layouts)."""
    for suffix, kind in ((".json", "json"), (".jsonl", "json"), (".parquet", "parquet")):
        if (folder / f"{name}{suffix}").is_file():
            return kind, [str(folder / f"{name}{suffix}")]
    for kind, pattern in (("parquet", "*.parquet"), ("json", "*.json")):
        files = sorted((folder / name).glob(f"**/{pattern}")) if (folder / name).is_dir() \
            else []
        files = files or sorted(folder.glob(f"{name}-*{pattern[1:]}"))
        if files:
            return kind, [str(f) for f in files]
    raise DatasetMissing(f"{folder}: no {name}.json, {name}.parquet or {name}/*.parquet")


def read(folder: Path, name: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of one released file, checked for ``columns``."""
    import datasets

    kind, files = _files(folder, name)
    # a scratch cache: the rows are copied out before it goes, and the data folder may be
    # read-only
    with _quiet(datasets), tempfile.TemporaryDirectory() as cache:
        table = datasets.load_dataset(kind, data_files=files, split="train", cache_dir=cache,
                                      keep_in_memory=True)
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise ValueError(f"{files[0]}: no column {', '.join(missing)} (it has "
                             f"{', '.join(table.column_names)}): not the released format")
        if len(table) == 0:
            raise ValueError(f"{files[0]}: no rows")
        return [{c: row[c] for c in columns} for row in table]


class _quiet:
    """``datasets`` without its progress bars (a worker's log is not a terminal)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __enter__(self) -> None:
        self.was = self.module.is_progress_bar_enabled()
        self.module.disable_progress_bars()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            self.module.enable_progress_bars()


def _qa(rows: list[dict[str, Any]], entity: int, attribute: str, perturbed: bool,
        paraphrase: bool) -> list[QA]:
    out = []
    for i, r in enumerate(rows):
        wrong = tuple(str(a) for a in r["perturbed_answer"]) if perturbed else ()
        if perturbed and not wrong:
            raise ValueError(f"row {i}: an empty perturbed_answer list")
        out.append(QA(entity if entity >= 0 else i // PER_AUTHOR,
                      f"q{i % PER_AUTHOR}" if attribute == "author" else f"q{i}",
                      str(r["question"]), str(r["answer"]),
                      str(r["paraphrased_answer"]) if paraphrase else str(r["answer"]), wrong))
    if perturbed and len({len(q.perturbed_answers) for q in out}) != 1:
        raise ValueError("every question needs the same number of perturbed answers")
    return out


def tofu(folder: str | Path, forget: int) -> Tofu:
    """The released TOFU files for the ``forget``% split (1, 5 or 10)."""
    folder = _folder(folder, "TOFU", TOFU_REPO)
    if forget not in TOFU_RETAIN:
        raise ValueError(f"TOFU's forget splits are 1, 5 and 10 (%), not {forget}")
    name = f"forget{forget:02d}"
    qa = ("question", "answer")
    evaluation = (*qa, "paraphrased_answer", "perturbed_answer")
    forget_rows = read(folder, f"{name}_perturbed", evaluation)
    if len(forget_rows) % PER_AUTHOR:
        raise ValueError(f"{name}_perturbed: {len(forget_rows)} rows, not whole authors of "
                         f"{PER_AUTHOR} questions")
    return Tofu(
        forget=_qa(forget_rows, -1, "author", True, True),
        retain_train=_qa(read(folder, TOFU_RETAIN[forget], qa), -1, "author", False, False),
        retain_eval=_qa(read(folder, "retain_perturbed", evaluation), -1, "author", True,
                        True),
        world_facts=_qa(read(folder, "world_facts_perturbed", (*qa, "perturbed_answer")),
                        -2, "row", True, False),
        real_authors=_qa(read(folder, "real_authors_perturbed", (*qa, "perturbed_answer")),
                         -3, "row", True, False))


def muse(folder: str | Path, corpus: str = "news") -> Muse:
    """The released MUSE files (``MUSE-News`` or ``MUSE-Books``)."""
    folder = _folder(folder, f"MUSE-{corpus.title()}", MUSE_REPOS.get(corpus, corpus))

    def texts(config: str, split: str) -> list[str]:
        return [str(r["text"]) for r in read(folder / config, split, ("text",))]

    def qa(split: str) -> list[QA]:
        rows = read(folder / "knowmem", split, ("question", "answer"))
        return _qa(rows, -4, "row", False, False)

    def shots(split: str) -> list[tuple[str, str]]:
        return [(str(r["question"]), str(r["answer"]))
                for r in read(folder / "knowmem", split, ("question", "answer"))]

    return Muse(texts("raw", "forget"), texts("raw", "retain1"),
                [(str(r["prompt"]), str(r["gt"]))
                 for r in read(folder / "verbmem", "forget", ("prompt", "gt"))],
                qa("forget_qa"), qa("retain_qa"), shots("forget_qa_icl"),
                shots("retain_qa_icl"), texts("privleak", "forget"),
                texts("privleak", "holdout"))


def _folder(folder: str | Path, what: str, repo: str) -> Path:
    path = Path(folder)
    if not path.is_dir():
        raise DatasetMissing(
            f"{what} not found: no directory {path}. Run with --download, or put a copy "
            f"of the Hugging Face dataset there: huggingface-cli download {repo} "
            f"--repo-type dataset --local-dir {path}")
    return path


def fetch(repo: str, folder: str | Path, *, dataset: bool) -> Path:
    """Download a Hugging Face repository into ``folder`` (``--download`` only: the one
    place the real mode touches the network)."""
    from huggingface_hub import snapshot_download

    snapshot_download(repo_id=repo, repo_type="dataset" if dataset else "model",
                      local_dir=str(folder))
    return Path(folder)
