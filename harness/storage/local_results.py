"""What ``harness submit`` uploads: one objective version's cells from the local store.

The version is found by what identifies it, the code and the hyperparameters; every
refusal says what to do instead (:class:`NotUploadable`).
"""

from __future__ import annotations

from django.utils.text import slugify

from harness.contract.suite import Suite
from harness.objectives.loading import LoadedObjective
from harness.storage import store
from harness.storage.models import Cell, Objective, ObjectiveVersion

FORMAT = 1  # webapp.uploads.FORMAT on the server


class NotUploadable(Exception):
    """Why the local results cannot be uploaded, in words."""


def local_version(loaded: LoadedObjective, path: str, suite: Suite) -> ObjectiveVersion:
    """The stored version of ``loaded`` (the file at ``path`` as it is now)."""
    run = f"harness run suite {suite.name} --objective {path}"
    slug = slugify(loaded.name.replace("_", "-")) or "objective"
    objective = Objective.objects.filter(slug=slug).first()
    versions = list(objective.versions.order_by("-created")) if objective else []
    exact = next((v for v in versions if v.key == loaded.version_key), None)
    if exact is not None:
        return exact
    same_hp = [v for v in versions if v.hyperparameters == dict(loaded.hyperparameters)]
    if same_hp:
        v = same_hp[0]
        raise NotUploadable(
            f"{path} changed since its results were computed: they are of the code with "
            f"sha256 {v.code_sha256[:12]}… (run {v.created:%Y-%m-%d %H:%M}), the file now has "
            f"{loaded.code_sha256[:12]}…. Restore the file, or rerun it: {run}")
    if versions:
        stored = "; ".join(f"{v.label}" for v in versions[:5])
        raise NotUploadable(f"no local results for {loaded.label} (stored versions of "
                            f"{loaded.name}: {stored}); pass the same --set as the run, or "
                            f"run it: {run}")
    raise NotUploadable(f"no local results for {path}: run it first: {run}")


def body(version: ObjectiveVersion, suite: Suite, variants: list[str] | None = None, *,
         private: bool = False) -> dict:
    """The upload body (``webapp.uploads.parse`` reads it) of the version's finished cells
    of ``suite`` (at its version, shortened or not) on its public variants."""
    run = f"harness run suite {suite.name} --objective FILE"
    cells = Cell.objects.filter(version=version, suite=suite.name)
    here = cells.filter(suite_version=suite.version)
    if not here.exists():
        others = sorted(set(cells.values_list("suite_version", flat=True)))
        hint = (f"; there are results at {', '.join(others)} (pass --epochs N for V+eN)"
                if others else "")
        raise NotUploadable(f"no local results of {version.label} on {suite.name} "
                            f"v{suite.version}{hint}")
    wanted = variants or suite.default_variants
    here = here.filter(variant__in=wanted).order_by("variant", "seed")
    unfinished = [c for c in here if c.status not in (Cell.OK, Cell.DIVERGED)]
    if unfinished:
        named = ", ".join(f"{c.variant} seed {c.seed} ({c.status})" for c in unfinished[:5])
        raise NotUploadable(f"{len(unfinished)} cells did not finish ({named}); rerun them "
                            f"({run} --force) or leave their variant out (--variants)")
    seeds: dict[str, int] = {}
    for c in here:
        seeds[c.variant] = seeds.get(c.variant, 0) + 1
    short = {v: n for v, n in seeds.items() if n < suite.min_seeds}
    if not seeds or short:
        have = ", ".join(f"{v}: {n}" for v, n in (short or seeds).items()) or "none"
        raise NotUploadable(f"too few seeds: {suite.name} needs at least {suite.min_seeds} "
                            f"per variant (you have {have}); run more: {run} --seeds N")
    metrics, curves = store.metrics_and_curves(c.pk for c in here)
    return {
        "format": FORMAT,
        "objective": {"name": version.objective.name, "code": version.code,
                      "hyperparameters": version.hyperparameters,
                      "visibility": "private" if private else "public"},
        "suite": suite.name, "suite_version": suite.version,
        "cells": [{"variant": c.variant, "seed": c.seed, "status": c.status,
                   "diverged_step": c.diverged_step, "wall_time": c.wall_time,
                   "metrics": metrics.get(c.pk, {}), "curves": curves.get(c.pk, {}),
                   "environment": c.environment} for c in here],
    }
