"""Verifying uploaded results: the server re-runs a secret sample and compares exactly.

The sample rule (:func:`draw`): on every variant of the upload, ``max(1, ceil(f · n))`` of
its ``n`` seeds (``f`` = ``settings.HARNESS_VERIFY_FRACTION``, 0.2 by default), chosen
uniformly without replacement by the operating system's random source (``secrets``),
after the claimed numbers are stored: the uploader cannot know which seeds are checked,
so every claimed seed must be right. A claimed cell the server already has a result for
(its own, or one of a verified upload) is compared as well, and the draw is among the rest.

When the sampled cells have finished on the server, :func:`settle` compares each with its
claim: status, divergence step, every metric and every curve, for exact equality (a CPU
cell is bit-reproducible on the same software and vector unit, whatever it was batched
with for the objectives the sample runs; see docs/reproducibility.md). Then

- every value equal → **verified**: the claimed cells join the version's results;
- values differ, and the two runs differ in something the numbers depend on (torch
  version, CPU vector unit, device, torch threads, the loss run in the sandbox or not,
  the number of cells batched together)
  → **unverifiable**: it says which,
  without calling the uploader wrong; the differing values are listed all the same;
- values differ on the same software and hardware → **mismatch**, listing every cell,
  metric, local value and server value that differ;
- a sampled cell the server could not finish (failed, timeout, killed) → unverifiable.

Neither of the last three reaches a public table.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from harness.contract.registry import suite_at
from harness.contract.suite import CellResult
from harness.storage import store
from harness.storage.models import Cell, Upload, UploadedCell

log = logging.getLogger(__name__)

# What a cell's numbers depend on besides the cell (docs/reproducibility.md), as
# (label, path into the cell's environment).
ENVIRONMENT = (("torch version", ("packages", "torch")),
               ("CPU vector unit (cpu_capability)", ("cpu_capability",)),
               ("device", ("device",)),
               ("torch threads", ("torch_threads",)),
               # the loss in the sandbox's processes or in the trainer's: the training is
               # the same, a reported training loss can differ in its last bit
               ("where the loss ran (sandbox protocol; not recorded = in-process)",
                ("sandbox", "protocol")),
               # the secret order the sandbox sends a batch's rows in (a key per server, or
               # HARNESS_SANDBOX_KEY): a position-dependent op (pow, sigmoid) sees its
               # values in other places under another key, so the last bits can move.
               # (How many cells shared a job no longer matters: harness/contract/chunks.py.)
               ("the sandbox's secret row order (its key)", ("sandbox", "row_order")),
               # public seeds, or a key every stream was drawn from (harness.contract.draws)
               ("the draws (public, or a server's key)", ("draws",)))
SHOWN_DIFFERENCES = 200  # stored per upload: enough to see the pattern


def fraction() -> float:
    return float(getattr(settings, "HARNESS_VERIFY_FRACTION", 0.2))


def draw(seeds: Mapping[str, Iterable[int]], share: float | None = None
         ) -> set[tuple[str, int]]:
    """The (variant, seed) cells to re-run: per variant ``max(1, ceil(share · n))`` of its
    ``n`` seeds, chosen by ``secrets.SystemRandom`` (unpredictable to the uploader)."""
    share = fraction() if share is None else share
    rng = secrets.SystemRandom()
    chosen = set()
    for variant, listed in seeds.items():
        pool = sorted(set(listed))
        k = min(len(pool), max(1, math.ceil(share * len(pool))))
        chosen.update((variant, s) for s in rng.sample(pool, k))
    return chosen


def differences(claimed: UploadedCell, cell: Cell, metrics: Mapping[str, float],
                curves: Mapping[str, list]) -> list[dict[str, Any]]:
    """Every value of ``claimed`` that the server's ``cell`` does not reproduce exactly:
    ``{variant, seed, metric, local, server}``; a curve is reported at its first differing
    point (``metric`` = ``curve[i]``), or by its length."""
    out = []

    def differ(name: str, local: Any, server: Any) -> None:
        out.append({"variant": claimed.variant, "seed": claimed.seed, "metric": name,
                    "local": local, "server": server})

    if claimed.status != cell.status:
        differ("status", claimed.status, cell.status)
    if claimed.diverged_step != cell.diverged_step:
        differ("diverged_step", claimed.diverged_step, cell.diverged_step)
    for name in sorted(set(claimed.metrics) | set(metrics)):
        local, server = claimed.metrics.get(name), metrics.get(name)
        if local is None or server is None or float(local) != float(server):
            differ(name, local, server)
    for name in sorted(set(claimed.curves) | set(curves)):
        local, server = claimed.curves.get(name), curves.get(name)
        if local is None or server is None:
            differ(f"curve {name}", None if local is None else f"{len(local)} points",
                   None if server is None else f"{len(server)} points")
            continue
        at = next((i for i, (a, b) in enumerate(zip(local, server, strict=False))
                   if not _same(a, b)), None)
        if at is not None:
            differ(f"{name}[{at}]", local[at], server[at])
        elif len(local) != len(server):
            differ(f"curve {name}", f"{len(local)} points", f"{len(server)} points")
    return out


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return float(a) == float(b)


def environment_gap(local: Mapping[str, Any], server: Mapping[str, Any]) -> list[str]:
    """What the numbers depend on that differs between two cells' environments, in words."""
    gaps = []
    for label, path in ENVIRONMENT:
        a, b = _at(local, path), _at(server, path)
        if a != b:
            gaps.append(f"{label}: yours {a if a is not None else 'not recorded'}, the "
                        f"server's {b if b is not None else 'not recorded'}")
    return gaps


def _at(env: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        env = env.get(key) if isinstance(env, Mapping) else None
    return env


def settle_cells(cell_ids: Iterable[int]) -> None:
    """Settle the pending uploads whose sample holds any of these cells (a worker stored or
    ended them). Never raises: a verification error must not fail the worker's group."""
    try:
        for pk in (Upload.objects.filter(status=Upload.PENDING,
                                         sample__cells__in=list(cell_ids))
                   .values_list("pk", flat=True).distinct()):
            settle(pk)
    except Exception:
        log.exception("settling uploads of cells %s failed", list(cell_ids))


def settle(upload_id: int) -> str:
    """Decide a pending upload once its sampled cells have finished; its status."""
    with transaction.atomic():
        upload = Upload.objects.select_for_update().get(pk=upload_id)
        if upload.status != Upload.PENDING:
            return upload.status
        cells = {(c.variant, c.seed): c for c in upload.sample.cells.all()}
        if any(c.status not in Cell.FINISHED for c in cells.values()):
            return upload.status
        claimed = list(upload.claimed.filter(sampled=True))
        metrics, curves = store.metrics_and_curves(c.pk for c in cells.values())
        found, gaps, unfinished = [], [], []
        for c in claimed:
            cell = cells[(c.variant, c.seed)]
            if cell.status not in (Cell.OK, Cell.DIVERGED):
                unfinished.append(f"{c.variant} seed {c.seed} {cell.status}"
                                  + (f" ({cell.reason})" if cell.reason else ""))
                continue
            diff = differences(c, cell, metrics.get(cell.pk, {}), curves.get(cell.pk, {}))
            if diff:
                found.extend(diff)
                gaps.extend(g for g in environment_gap(c.environment, cell.environment)
                            if g not in gaps)
        upload.differences = found[:SHOWN_DIFFERENCES]
        if unfinished:
            upload.status = Upload.UNVERIFIABLE
            upload.reason = ("the server's run did not finish: " + "; ".join(unfinished))
        elif found and gaps:
            upload.status = Upload.UNVERIFIABLE
            upload.reason = ("the numbers differ, and so does what they depend on: "
                             + "; ".join(gaps) + ". Run locally on the server's setup "
                             "(its environment is on each cell of the sample) to verify.")
        elif found:
            upload.status = Upload.MISMATCH
        else:
            upload.status = Upload.VERIFIED
            _promote(upload, set(cells))
        upload.checked = timezone.now()
        upload.save(update_fields=["status", "reason", "differences", "checked"])
        return upload.status


def _promote(upload: Upload, sampled: set[tuple[str, int]]) -> None:
    """The verified upload's other claimed cells become the version's results; a cell the
    server has already stored for the same key is kept (it is the server's own number)."""
    suite = suite_at(upload.suite, upload.suite_version)
    existing = set(Cell.objects.filter(
        version=upload.version, suite=upload.suite, suite_version=upload.suite_version,
        status__in=Cell.FINISHED).values_list("variant", "seed"))
    results = [CellResult(c.variant, c.seed, c.status, metrics=dict(c.metrics),
                          curves=dict(c.curves), diverged_step=c.diverged_step,
                          wall_time=c.wall_time or 0.0,
                          info={**c.environment, "uploaded": upload.pk})
               for c in upload.claimed.exclude(sampled=True).order_by("variant", "seed")
               if (c.variant, c.seed) not in existing | sampled]
    store.store_results(upload.version, suite, results, {})
