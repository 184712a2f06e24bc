"""One job's steps, shared by every runner: the canonical chunks' jobs, their fixtures
built beforehand, training that turns an objective's failure into an output, and the cells
of a chunk that were asked for."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract.pipeline import Job, Pipeline, TrainOutput, failure_reason
from harness.contract.suite import CellResult, Suite, Variant

if TYPE_CHECKING:
    from harness.contract.chunks import Chunk
    from harness.objectives.loading import LoadedObjective


def prepare_fixtures(suite: Suite, variants: list[Variant], seeds: list[int], *,
                     data_root: str | None = None, download: bool = False,
                     workers: int = 1, say: Callable[[str], None] | None = None) -> str:
    """Build (or find) every fixture the cells' chunks need (the seeds asked for and their
    chunks' other seeds: :mod:`harness.contract.chunks`), once, before workers start: a summary
    such as ``"6 reused, 0 built"`` ('' for a suite without fixtures). ``data_root`` and
    ``download`` reach the builders (where a real data set is), not the keys. With
    ``workers`` > 1 the fixtures not stored yet are built that many at a time, each in a
    one-thread process (every fixture is built from its config and seed alone; the store's
    lock keeps two builders of one entry apart). ``say`` hears, before any is built, how
    many are missing."""
    from harness.contract.chunks import chunks
    from harness.contract.registry import pipeline
    from harness.data import fixtures

    steps, by_name = pipeline(suite), {v.name: v for v in variants}
    needed: list[tuple[str, int | None, dict[str, Any] | None]] = []
    for chunk in chunks(suite, by_name, seeds):  # a chunk's every seed trains
        needed += [e for e in steps.fixtures(suite, [by_name[chunk.variant]], chunk.seeds)
                   if e not in needed]
    if not needed:
        return ""
    ledger = fixtures.Ledger()
    where = {"data_root": data_root, "download": download}
    # the store's folder is resolved here: a worker forked from a fork server started
    # earlier keeps the environment of then
    directory = fixtures.root()
    missing = []
    for name, seed, config in needed:
        k = fixtures.stored_key(suite, name, seed, config, directory=directory)
        if k is not None:
            ledger.reused.append(k)
        else:
            missing.append((suite, name, seed, config, where, directory))
    if not missing:
        return ledger.summary()
    if say is not None:
        say(f"{suite.name}: building {len(missing)} fixture{'s' * (len(missing) > 1)} "
            f"({', '.join(sorted({m[1] for m in missing}))}), once per machine: they are "
            f"cached in {directory}")
    from harness.runner.processes import map_in_workers

    start = time.perf_counter()
    for built in map_in_workers(_build_fixture, missing, workers=workers):
        ledger.merge(built)
    ledger.seconds = time.perf_counter() - start  # wall time, not the workers' sum
    return ledger.summary()


def _build_fixture(suite: Suite, name: str, seed: int | None, config: dict[str, Any] | None,
                   where: dict[str, Any], directory: Path):
    """One fixture, built (or found) in this process: its ledger."""
    from harness.data import fixtures

    ledger = fixtures.Ledger()
    fixtures.load(suite, name, seed, config, directory=directory, ledger=ledger, where=where)
    return ledger



def train_safely(pipeline: Pipeline, suite: Suite, objective: LoadedObjective,
                 inputs: Mapping[str, Any], plan: Mapping[str, Any],
                 **options: Any) -> TrainOutput:
    """``pipeline.train``, with an objective failure turned into an output instead of raising."""
    from harness.objectives.loading import user_traceback
    from harness.train import ObjectiveRuntimeError

    try:
        return pipeline.train(suite, objective, dict(inputs), dict(plan), **options)
    except ObjectiveRuntimeError as exc:
        cause = exc.__cause__ or exc
        message = f"{exc}\n{user_traceback(cause, objective.path)}".rstrip()
        return TrainOutput(error=message, reason=failure_reason(cause))



def chunk_jobs(steps: Pipeline, suite: Suite, variants: list[Variant], seeds: list[int], *,
               data_root: str | None = None,
               download: bool = False) -> Iterator[tuple[Chunk, Job]]:
    """The jobs training ``variants × seeds``: each canonical chunk covering them
    (:mod:`harness.contract.chunks`) prepared on its own, one at a time, so that a cell trains with
    the same members in the same places however many cells were asked for."""
    from harness.contract.chunks import chunks

    by_name = {v.name: v for v in variants}
    for chunk in chunks(suite, by_name, seeds):
        for job in steps.prepare(suite, [by_name[chunk.variant]], chunk.seeds,
                                 data_root=data_root, download=download):
            yield chunk, job



def asked(chunk: Chunk, results: list[CellResult]) -> list[CellResult]:
    """The results of the cells asked for; the chunk's other seeds trained only to keep
    its shape."""
    return [r for r in results if r.variant == chunk.variant and r.seed in chunk.wanted]



def share_of(chunk: Chunk, job: Job,
             progress: Callable[[float], None] | None) -> Callable[[float], None] | None:
    """``progress`` counting only the cells asked for (the trainer reports all members)."""
    if progress is None:
        return None
    part = sum(1 for v, s in job.members if v == chunk.variant and s in chunk.wanted)
    scale = part / max(len(job.members), 1)
    return lambda cells: progress(cells * scale)
