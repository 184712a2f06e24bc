"""A group, and the one way to run it: the CLI's workers, the Python API and the Celery
task all call :func:`run_group`.

A *group* is the cells of one objective that train together as one seed-batched run (some
of a suite version's variants × seeds, each cell in its canonical chunk:
:mod:`harness.contract.chunks`). Whether it trains trusted (in this process) or sandboxed
(the loss served from the sandbox, everything else here) is the group's ``sandboxed``
field, decided once by whoever builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.suite import CellResult


@dataclass(frozen=True)
class Group:
    """Cells of one objective trained together: some variants × seeds of one suite version.

    ``objective`` is what :func:`harness.objectives.loading.load_objective` takes (a file,
    a built-in name, a dotted module) and ``overrides`` its hyperparameters. ``sandboxed``
    trains it as the server's workers train a submission: the file, whose text is
    ``source`` (read from ``objective`` when empty), is then never imported outside the
    sandbox, and ``objective`` names it only (its file name is what error messages show).
    """

    objective: str
    suite: str
    suite_version: str
    variants: tuple[str, ...]
    seeds: tuple[int, ...]
    overrides: tuple[tuple[str, Any], ...] = ()
    sandboxed: bool = False
    source: str = ""
    row_secret: str = ""  # the version's row-order key from a server (sandboxed only)

    @property
    def cells(self) -> int:
        return len(self.variants) * len(self.seeds)


def run_group(group: Group, *, device: str = "cpu", threads: int = 1,
              data_root: str | None = None, download: bool = False,
              progress: Callable[[float], None] | None = None,
              heartbeat: Callable[[], None] | None = None,
              **options: Any) -> list[CellResult]:
    """Train and judge every cell of ``group`` (the results of the cells asked for, not of
    their chunks' other seeds). ``progress`` gets the cells' worth of training done since
    its last call; ``heartbeat`` is called while the sandbox serves the loss; ``threads``
    are this process's torch threads (a sandboxed run sizes its limits by them); other
    ``options`` (``mode``) reach the suite's trainer in process.

    Never raises for anything the objective does (its failures are results); raises for
    infrastructure problems, which the caller retries or reports."""
    from harness.contract.registry import suite_at

    suite = suite_at(group.suite, group.suite_version)
    variants, seeds = list(group.variants), list(group.seeds)
    if group.sandboxed:
        from harness.objectives.loading import read_source
        from harness.runner.sandboxed import run_cells_sandboxed

        path = Path(group.objective)
        results = run_cells_sandboxed(
            suite, group.source or read_source(path), path.name or "objective.py",
            dict(group.overrides), variants, seeds, threads=threads, device=device,
            heartbeat=heartbeat, progress=progress, data_root=data_root,
            row_secret=group.row_secret.encode() or None)
        return results
    from harness.objectives.loading import load_objective
    from harness.runner.inprocess import run_cells

    objective = load_objective(group.objective, dict(group.overrides) or None)
    return run_cells(suite, objective, variants, seeds, data_root=data_root, download=download,
                     progress=progress, device=device, **options)


def is_tuned_final(suite_version: str) -> bool:
    """Whether cells of ``suite_version`` are a tuned track's final cells (``V+tunedK``),
    which only the tuned protocol trains (:func:`run_tuned_group`)."""
    import re

    return re.search(r"\+tuned\d+$", suite_version) is not None


def run_tuned_group(group: Group, *, device: str = "cpu", threads: int = 1,
                    data_root: str | None = None, download: bool = False,
                    progress: Callable[[float], None] | None = None,
                    heartbeat: Callable[[], None] | None = None,
                    **options: Any) -> list[Any]:
    """The tuned protocol (:mod:`harness.runner.tuning`) for each variant of ``group``, whose
    suite version is a tuned track's final one (``V+tunedK``): its search on the validation
    split, the choice, and the final cells of ``group.seeds``; trusted in this process or
    with the loss in the sandbox, as the group says. One
    :class:`~harness.runner.tuning.Tuned` per variant; the caller stores each trial's
    search cells (``suite.trial(i)``) and the final cells.

    Never raises for anything the objective does; raises for infrastructure problems."""
    from harness.contract.registry import suite_at
    from harness.runner.tuning import tune

    base = suite_at(group.suite, group.suite_version.rpartition("+tuned")[0])
    if base.tuning is None or base.tuned().version != group.suite_version:
        raise ValueError(f"{group.suite} {group.suite_version} is not a tuned track of "
                         f"this suite's protocol")
    out = []
    for variant in group.variants:
        if group.sandboxed:
            from harness.objectives.loading import read_source
            from harness.runner.tuning_sandboxed import tune_sandboxed

            path = Path(group.objective)
            out.append(tune_sandboxed(
                base, group.source or read_source(path), path.name or "objective.py",
                dict(group.overrides), variant, list(group.seeds), threads=threads,
                device=device, heartbeat=heartbeat, progress=progress, data_root=data_root,
                row_secret=group.row_secret.encode() or None))
        else:
            out.append(tune(base.name, base.version, group.objective, dict(group.overrides),
                            variant, list(group.seeds),
                            {"device": device, "data_root": data_root, "download": download,
                             **{k: v for k, v in options.items() if k == "mode"}}))
            if progress is not None:
                progress(float(len(group.seeds)))
    return out
