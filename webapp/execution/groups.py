"""Cells trained together, and one worker's go at them.

A :class:`QueuedGroup` is one objective version and suite version, some variants × seeds, so
that the suite seed-batches them. A :class:`GroupRun` claims the group's cells
(:func:`harness.storage.store.claim`), trains them while beating their heartbeat, and stores
them through :func:`harness.storage.store.store_results`, every write fenced by the claim.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Q

from harness.contract.registry import suite_at
from harness.contract.suite import CellResult, Suite
from harness.runner.group import Group, is_tuned_final, run_group, run_tuned_group
from harness.storage import store
from harness.storage.models import Cell, ObjectiveVersion
from webapp import verification
from webapp.execution.database import DB_ERRORS, retry_db
from webapp.execution.heartbeat import Heartbeat
from webapp.execution.placement import device_for, training_threads

log = logging.getLogger(__name__)

INTERNAL_ERROR = ("internal error while running this cell (not caused by the objective); "
                  "it has been logged")


class InfrastructureError(Exception):
    """A failure outside the objective that may pass (the sandbox could not start, ...):
    the Celery task retries it; the objective's own failures are results, never this."""


@dataclass(frozen=True)
class QueuedGroup:
    """Cells trained together: one objective version and suite (version), variants × seeds.

    A Celery task takes one variant's seeds (the unit spread over workers); the thread
    runner takes every variant that shares the seeds. Either trains its cells' member
    chunks one after another (harness/contract/chunks.py), so a cell's numbers are the same from
    both, from the CLI and from a rerun of its seed alone.
    """

    version_id: int
    suite: str
    suite_version: str
    variants: tuple[str, ...]
    seeds: tuple[int, ...]

    def cells(self) -> Q:
        return Q(version_id=self.version_id, suite=self.suite, suite_version=self.suite_version,
                 variant__in=list(self.variants), seed__in=list(self.seeds))


def groups(cells, *, per_variant: bool = True) -> list[QueuedGroup]:
    """Groups covering ``cells`` (a queryset), in a stable order: one per variant, or with
    ``per_variant=False`` one per set of variants sharing the same seeds."""
    by_variant: dict[tuple[int, str, str, str], list[int]] = {}
    for version_id, suite, suite_version, variant, seed in cells.order_by(
            "version_id", "suite", "suite_version", "variant", "seed").values_list(
            "version_id", "suite", "suite_version", "variant", "seed"):
        by_variant.setdefault((version_id, suite, suite_version, variant), []).append(seed)
    merged: dict[tuple, list[str]] = {}
    for (version_id, suite, suite_version, variant), seeds in by_variant.items():
        seeds_key = tuple(sorted(set(seeds)))
        key = (version_id, suite, suite_version, variant if per_variant else None, seeds_key)
        merged.setdefault(key, []).append(variant)
    return [QueuedGroup(version_id, suite, suite_version, tuple(variants), seeds)
            for (version_id, suite, suite_version, _, seeds), variants in merged.items()]


class GroupRun:
    """One worker's go at a group: claim it, train it with heartbeats, store it.

    Every write after the claim is fenced by it (see :mod:`harness.storage.store`), so a worker
    that lost its cells (the reaper gave them away) can no longer write them.
    """

    def __init__(self, group: QueuedGroup, worker: str, held: Mapping[int, int] | None = None):
        self.group, self.worker = group, worker
        self.claimed: store.Claim = {int(k): int(v) for k, v in (held or {}).items()}
        self._version: ObjectiveVersion | None = None
        self._suite: Suite | None = None

    @property
    def version(self) -> ObjectiveVersion:
        if self._version is None:
            self._version = ObjectiveVersion.objects.select_related("objective").get(
                pk=self.group.version_id)
        return self._version

    @property
    def suite(self) -> Suite:
        if self._suite is None:
            self._suite = suite_at(self.group.suite, self.group.suite_version)
        return self._suite

    def claim(self) -> bool:
        """Take the group's cells that nobody else holds; False when there are none."""
        ids = list(Cell.objects.filter(self.group.cells()).values_list("pk", flat=True))
        self.claimed = store.claim(ids, worker=self.worker, held_claim=self.claimed)
        return bool(self.claimed)

    def members(self) -> tuple[list[str], list[int]]:
        """The claimed cells' variants and seeds (all of the group's unless some were
        finished or held elsewhere; cells not claimed are trained but not stored)."""
        pairs = list(Cell.objects.filter(pk__in=list(self.claimed)).values_list(
            "variant", "seed"))
        return sorted({v for v, _ in pairs}), sorted({s for _, s in pairs})

    def execute(self, *, device: str | None = None) -> list[CellResult]:
        """Train and judge the claimed cells while beating their heartbeat: a built-in
        baseline in this process (trusted), a submission with its loss in the sandbox."""
        variants, seeds = self.members()
        version = self.version
        device = device or device_for(self.suite, variants)
        tuned = is_tuned_final(self.group.suite_version)
        with Heartbeat(self.claimed, cells=len(variants) * len(seeds)) as beat:
            # from a thread of its own: a long call into the trainer must not stop the beat
            beat.start_thread()
            if version.objective.is_builtin:
                with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
                    path = Path(tmp) / code_filename(version.objective.slug)
                    path.write_text(version.code, encoding="utf-8")
                    group = self._to_run(str(path), variants, seeds)
                    results = (self._tuned(run_tuned_group, group, device, beat) if tuned
                               else run_group(group, device=device, threads=training_threads(),
                                              progress=beat.advance))
                    for r in results:
                        r.error = scrub_paths(scrub_paths(r.error, Path(tmp).resolve()), tmp)
            else:
                group = self._to_run(code_filename(version.objective.slug), variants, seeds,
                                     sandboxed=True, source=version.code)
                results = _sandboxed(group, device, beat, self._tuned if tuned else None)
        return results

    def _tuned(self, run: Any, group: Group, device: str, beat: Heartbeat) -> list[CellResult]:
        """The tuned protocol for the group's final cells (``V+tunedK``): every trial's
        search cells stored once the protocol returns, while this worker still holds some
        of the final cells (nobody queues the search cells, so no claim fences them; a worker
        whose cells were taken from it writes nothing), the final cells returned for the
        claimed store."""
        from harness.contract.registry import suite_at
        from harness.runner.environment import environment

        base = suite_at(group.suite, group.suite_version.rpartition("+tuned")[0])
        env = environment(device)
        where = None if group.sandboxed else Path(group.objective).parent  # a built-in's tmp
        final = []
        for tuned in run(group, device=device, threads=training_threads(),
                         heartbeat=beat.beat, progress=beat.advance):
            if not retry_db(lambda: Cell.objects.filter(store.held(self.claimed)).exists()):
                continue
            for index, cells in tuned.searched.items():
                if where is not None:
                    for c in cells:
                        c.error = scrub_paths(scrub_paths(c.error, where.resolve()), where)
                retry_db(lambda i=index, c=cells: store.store_results(
                    self.version, base.trial(i), c, env))
            final += tuned.final
        return final

    def _to_run(self, objective: str, variants: list[str], seeds: list[int],
                **sandboxed: Any) -> Group:
        """The engine's group training these cells with the stored version's code and
        hyperparameters."""
        return Group(objective, self.group.suite, self.group.suite_version, tuple(variants),
                     tuple(seeds), tuple(dict(self.version.hyperparameters).items()),
                     **sandboxed)

    def store(self, results: list[CellResult], device: str | None = None) -> int:
        """Store the results into the cells still held; database blips are retried here,
        so a few seconds of a restarting database do not throw the training away."""
        from harness.runner.environment import environment

        env = environment(device or device_for(self.suite, list(self.group.variants)))
        stored = retry_db(lambda: store.store_results(self.version, self.suite, results, env,
                                                        claim=self.claimed))
        verification.settle_cells(self.claimed)  # an upload's sample may have landed
        return stored

    def end(self, status: str, reason: str, error: str) -> int:
        """End the held cells without results (time limit, infrastructure)."""
        ended = store.finish(store.held(self.claimed), status, reason, error)
        verification.settle_cells(self.claimed)
        return ended

    def fail(self, exc: BaseException) -> None:
        """Fail the held cells for an exception raised outside the objective's training."""
        reason, message = failure(exc)
        try:
            self.end(Cell.FAILED, reason, message)
        except DB_ERRORS:
            log.exception("could not mark cells of %s failed; the reaper will requeue them",
                          self.group)

    def release(self) -> list[int]:
        return store.release(store.held(self.claimed))


def _sandboxed(group: Group, device: str, beat: Heartbeat,
               tuned: Any = None) -> list[CellResult]:
    """A submitted objective's cells, trained in the sandbox and judged here (``tuned``:
    through the tuned protocol, :meth:`GroupRun._tuned`); a failure of the sandbox itself
    (not of the objective) is an infrastructure error, retried."""
    try:
        if tuned is not None:
            return tuned(run_tuned_group, group, device, beat)
        return run_group(group, device=device, threads=training_threads(), heartbeat=beat.beat,
                         progress=beat.advance)
    except DB_ERRORS:
        raise  # the heartbeat's database, retried as such
    except ImportError as exc:
        raise InfrastructureError("the sandbox is not available on this worker") from exc
    except Exception as exc:
        if type(exc).__name__ == "SoftTimeLimitExceeded":
            raise  # the worker's time limit, not the sandbox's failure
        raise InfrastructureError(f"the sandbox failed: {type(exc).__name__}: {exc}") from exc


def failure(exc: BaseException) -> tuple[str, str]:
    """(reason, message) for an exception outside the objective's training."""
    from harness.objectives.loading import ObjectiveError

    if isinstance(exc, ObjectiveError):
        return "objective", exc.message
    if isinstance(exc, LookupError) and "no longer available" in str(exc):
        return "infrastructure", str(exc)
    return "infrastructure", INTERNAL_ERROR


def code_filename(slug: str) -> str:
    """A module-safe file name for an objective's code: ``my-loss`` → ``my_loss.py``."""
    stem = re.sub(r"\W+", "_", slug).strip("_") or "objective"
    return f"{'_' if stem[0].isdigit() else ''}{stem}.py"


def scrub_paths(text: str, directory: str | Path) -> str:
    """Messages name the user's file, never the server's temporary directory."""
    return text.replace(str(directory).rstrip("/") + "/", "") if text else text


