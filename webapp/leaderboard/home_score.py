"""The home table's cross-suite score per row: the one aggregate of
harness/report/aggregate.py, ranked among the rows scored on the same suites, and no rank
while a suite's reference has no score."""

from __future__ import annotations

from collections import Counter

import numpy as np

from harness.report import aggregate


def scorable(row: dict) -> bool:
    """Whether a summary row has a score on its suite: ranked, with a finite normalized
    score on every seed it needs of every ranked variant."""
    return bool(row["ranked"] and row.get("ranked_seeds") and all(row["ranked_seeds"].values()))


def ranked_scores(row: dict) -> dict[str, np.ndarray]:
    """A summary row's per-seed normalized scores on the suite's ranked variants, seeds in
    order (what :mod:`harness.report.aggregate` takes for one suite)."""
    return {x: np.array([seeds[k] for k in sorted(seeds, key=int)], dtype=float)
            for x, seeds in row["ranked_seeds"].items()}


def score_rows(rows: list[dict], referenced: set[str]) -> None:
    """Each row's cross-suite score, interval, rank, rank interval and tie group, ranked
    among the rows scored on the same suites (harness/report/aggregate.py). Not ranked
    against nothing: a row scored on a suite whose reference has no score (not in
    ``referenced``: a fresh board whose baselines are still training) gets its score but
    no rank, and ``no_reference`` names those suites."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for row in rows:
        scores = row.pop("_scores")
        row["coverage"] = sorted(scores)
        row["score_n"] = sum(len(x) for v in scores.values() for x in v.values())
        row.update(score=None, score_low=None, score_high=None, rank=None, rank_low=None,
                   rank_high=None, rank_of=None, tied=False)
        if scores:
            groups.setdefault(tuple(row["coverage"]), []).append((row, scores))
    for members in groups.values():
        found = aggregate.ranked({str(i): scores for i, (_, scores) in enumerate(members)})
        sizes = Counter(r.tie_group for r in found)
        for r in found:
            members[int(r.name)][0].update(
                score=r.aggregate.score, score_low=r.aggregate.ci_low,
                score_high=r.aggregate.ci_high, rank=r.rank, rank_low=r.rank_low,
                rank_high=r.rank_high, rank_of=len(found), tied=sizes[r.tie_group] > 1)
    for row in rows:
        row["no_reference"] = [c for c in row["coverage"] if c not in referenced]
        if row["no_reference"]:
            row.update(rank=None, rank_low=None, rank_high=None, rank_of=None, tied=False)
