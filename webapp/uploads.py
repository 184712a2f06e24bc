"""Local results uploaded with ``harness submit``: every check, then one transaction.

:func:`parse` checks the JSON body's shape and limits without touching the database;
:func:`accept` checks it against the registry and the sandboxed validator, then stores the
objective version, the claimed cells (:class:`~harness.storage.models.UploadedCell`, apart from the
server's cells), the sample the server re-runs (:mod:`webapp.verification`) as a
submission of its own, and hands that to the executor on commit. Anything refused raises
:class:`UploadError` before a row is written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from harness.contract.registry import builtins, get_suite
from harness.contract.suite import Suite, is_number
from harness.objectives.loading import LoadedObjective
from harness.report.textsafe import hidden_characters, is_storable
from harness.storage.models import (
    Cell,
    Objective,
    ObjectiveVersion,
    Submission,
    Upload,
    UploadedCell,
)
from webapp import verification
from webapp.execution import executors
from webapp.execution.groups import code_filename
from webapp.forms import configured, queued_cell

FORMAT = 1
MAX_SEEDS_PER_VARIANT = 20
MAX_CURVE_POINTS = 10_000  # per curve; a suite's curves have one point per epoch
STATUSES = (Cell.OK, Cell.DIVERGED)  # a cell that did not train has nothing to verify


class UploadError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def bad(message: str) -> UploadError:
    return UploadError(400, message)


@dataclass(frozen=True)
class ClaimedCell:
    variant: str
    seed: int
    status: str
    diverged_step: int | None
    wall_time: float | None
    metrics: dict[str, float]
    curves: dict[str, list[float | None]]
    environment: dict[str, Any]


@dataclass(frozen=True)
class Parsed:
    name: str
    code: str
    hyperparameters: dict[str, Any]
    suite: Suite
    suite_version: str
    cells: tuple[ClaimedCell, ...]
    visibility: str = Objective.PUBLIC


# --- the body's shape ----------------------------------------------------------------------


def parse(body: Any) -> Parsed:
    """The upload ``body`` (decoded JSON) checked field by field; :class:`UploadError`
    (400) names the first field that is wrong."""
    data = _object(body, "the body", {"format", "objective", "suite", "suite_version", "cells"})
    if data["format"] != FORMAT or isinstance(data["format"], bool):
        raise bad(f"format must be {FORMAT} (this server's upload format); update harness")
    objective = _object(data["objective"], "objective", {"name", "code", "hyperparameters"},
                        optional={"visibility"})
    visibility = objective.get("visibility", Objective.PUBLIC)
    if visibility not in (Objective.PUBLIC, Objective.PRIVATE):
        raise bad("objective.visibility must be public or private (of the code; results "
                  "are public once verified either way)")
    name = _text(objective["name"], "objective.name", 100)
    hidden = hidden_characters(name)
    if hidden or not slugify(name):
        raise bad("objective.name must be plain text with a letter or digit"
                  + (f" (it contains {', '.join(hidden)})" if hidden else ""))
    code = _text(objective["code"], "objective.code", None)
    if len(code.encode("utf-8")) > settings.MAX_OBJECTIVE_BYTES:
        raise bad(f"objective.code is {len(code.encode('utf-8'))} bytes; the limit is "
                  f"{settings.MAX_OBJECTIVE_BYTES}")
    hyperparameters = objective["hyperparameters"]
    if not isinstance(hyperparameters, dict) or not all(
            isinstance(k, str) and k.isidentifier() for k in hyperparameters):
        raise bad("objective.hyperparameters must be an object of name: value")
    try:
        suite = get_suite(_text(data["suite"], "suite", 50))
    except KeyError:
        raise bad(f"unknown suite {data['suite']!r}") from None
    suite_version = _text(data["suite_version"], "suite_version", 20)
    if not isinstance(data["cells"], list) or not data["cells"]:
        raise bad("cells must be a non-empty list")
    limit = len(suite.default_variants) * MAX_SEEDS_PER_VARIANT
    if len(data["cells"]) > limit:
        raise bad(f"{len(data['cells'])} cells; at most {limit} ({MAX_SEEDS_PER_VARIANT} "
                  f"seeds on each of the suite's {len(suite.default_variants)} variants)")
    cells = tuple(_cell(suite, c, i) for i, c in enumerate(data["cells"]))
    keys = [(c.variant, c.seed) for c in cells]
    if len(set(keys)) != len(keys):
        raise bad("a (variant, seed) appears twice in cells")
    return Parsed(name.strip(), code.replace("\r\n", "\n"), hyperparameters, suite,
                  suite_version, cells, visibility)


def _cell(suite: Suite, raw: Any, i: int) -> ClaimedCell:
    where = f"cells[{i}]"
    c = _object(raw, where, {"variant", "seed", "status", "metrics", "curves", "environment"},
                optional={"diverged_step", "wall_time"})
    variant = _text(c["variant"], f"{where}.variant", 100)
    if variant not in suite.default_variants:
        raise bad(f"{where}.variant: {variant!r} is not a public variant of {suite.name} "
                  f"({', '.join(suite.default_variants)})")
    seed = c["seed"]
    if not _is_int(seed) or not 0 <= seed < 2 ** 31:
        raise bad(f"{where}.seed must be an integer in [0, 2^31)")
    if c["status"] not in STATUSES:
        raise bad(f"{where}.status must be ok or diverged (rerun cells that did not finish "
                  f"before uploading), got {c['status']!r}")
    step = c.get("diverged_step")
    if step is not None and not (_is_int(step) and 0 <= step < 2 ** 31):
        raise bad(f"{where}.diverged_step must be an integer in [0, 2^31) or null")
    wall = c.get("wall_time")
    if wall is not None and not is_number(wall):
        raise bad(f"{where}.wall_time must be a finite number or null")
    declared = {m.name for m in suite.metrics}
    metrics = c["metrics"]
    if not isinstance(metrics, dict):
        raise bad(f"{where}.metrics must be an object of name: number")
    for name, value in metrics.items():
        if name not in declared:
            raise bad(f"{where}.metrics: {name!r} is not a metric of {suite.name}")
        if not is_number(value):
            raise bad(f"{where}.metrics.{name} must be a finite number")
    if c["status"] == Cell.OK and suite.headline not in metrics:
        raise bad(f"{where}: an ok cell needs its headline metric {suite.headline!r}")
    curves = c["curves"]
    if not isinstance(curves, dict):
        raise bad(f"{where}.curves must be an object of name: list of numbers")
    known = {k.name for k in suite.curves}
    for name, values in curves.items():
        if name not in known:
            raise bad(f"{where}.curves: {name!r} is not a curve of {suite.name}")
        if not isinstance(values, list) or len(values) > MAX_CURVE_POINTS or not all(
                v is None or is_number(v) for v in values):
            raise bad(f"{where}.curves.{name} must be a list of at most {MAX_CURVE_POINTS} "
                      f"numbers (null where not finite)")
    if not isinstance(c["environment"], dict):
        raise bad(f"{where}.environment must be an object")
    return ClaimedCell(variant, seed, c["status"], step, wall, metrics, curves,
                       c["environment"])


def _object(value: Any, what: str, required: set[str], optional: set[str] = frozenset()
            ) -> dict:
    if not isinstance(value, dict):
        raise bad(f"{what} must be a JSON object")
    missing = sorted(required - set(value))
    unknown = sorted(set(value) - required - set(optional))
    if missing:
        raise bad(f"{what}: missing {', '.join(missing)}")
    if unknown:
        raise bad(f"{what}: unknown field {', '.join(map(repr, unknown))}")
    return value


def _text(value: Any, what: str, limit: int | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad(f"{what} must be a non-empty string")
    if limit is not None and len(value) > limit:
        raise bad(f"{what} is longer than {limit} characters")
    if not is_storable(value):
        raise bad(f"{what} contains a character that cannot be stored (NUL)")
    return value


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# --- against the server ----------------------------------------------------------------


def accept(user, parsed: Parsed) -> Upload:
    """Check ``parsed`` against the server (suite version, seeds, name, code), store it and
    queue its sample; :class:`UploadError` before anything is stored."""
    suite = configured(parsed.suite)
    from harness.contract import draws

    if draws.keyed():  # its own cells are drawn from its key: public-draw numbers never equal
        raise UploadError(409, "this server ranks cells drawn from its secret key "
                          "(docs/sandbox.md, keyed draws), which no local run can reproduce: "
                          "results run on public draws cannot be verified here. Submit the "
                          "objective's code on the Submit page (/submit/) instead, "
                          "and the server runs it on its keyed cells.")
    if parsed.suite_version != suite.version:
        raise UploadError(409, f"the results are of {suite.name} version "
                          f"{parsed.suite_version}; this server runs version {suite.version} "
                          f"(rerun them locally at that version)")
    seeds: dict[str, list[int]] = {}
    for c in parsed.cells:
        seeds.setdefault(c.variant, []).append(c.seed)
    short = {v: len(s) for v, s in seeds.items() if len(s) < suite.min_seeds}
    if short:
        raise bad(f"too few seeds: {suite.name} needs at least {suite.min_seeds} per variant "
                  f"(" + ", ".join(f"{v} has {n}" for v, n in short.items()) + ")")
    slug = slug_for(parsed.name)
    taken = Objective.objects.filter(slug=slug).first()
    builtin = slug in {slug_for(name) for name in builtins()}  # stored or not yet
    if builtin or taken is not None and (taken.is_builtin or taken.owner_id != user.pk):
        raise UploadError(409, f"an objective named {slug!r} exists and is not yours; "
                          f"rename your file (the name is its stem)")
    loaded = _validated(parsed, slug, suite)
    drawn, known = _sample(seeds, slug, loaded, suite)
    cap = settings.MAX_QUEUED_CELLS_PER_USER
    try:
        with transaction.atomic():
            get_user_model().objects.select_for_update().get(pk=user.pk)
            active = Cell.objects.filter(version__objective__owner=user,
                                         status__in=(Cell.QUEUED, Cell.RUNNING)).count()
            if active + len(drawn) > cap:
                raise UploadError(429, f"verifying this upload queues {len(drawn)} cells and "
                                  f"you have {active} queued or running; the limit is {cap}")
            upload = _store(user, parsed, suite, slug, loaded, drawn | known)
            transaction.on_commit(partial(executors.enqueue, upload.sample))
            transaction.on_commit(partial(verification.settle, upload.pk))  # nothing to run
    except IntegrityError:  # a concurrent upload or submission took the name
        raise UploadError(409, f"the name {slug!r} was just taken; rename your file") from None
    return upload


def _sample(seeds: dict[str, list[int]], slug: str, loaded: LoadedObjective, suite: Suite
            ) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The cells to check: (a secret draw among the claimed cells the server has no result
    for, every claimed cell it has one for already: its own, or a verified upload's,
    compared at no cost)."""
    known = set(Cell.objects.filter(
        version__objective__slug=slug, version__key=loaded.version_key, suite=suite.name,
        suite_version=suite.version, status__in=STATUSES).values_list("variant", "seed"))
    fresh = {v: [s for s in listed if (v, s) not in known] for v, listed in seeds.items()}
    return verification.draw({v: s for v, s in fresh.items() if s}), {
        (v, s) for v, listed in seeds.items() for s in listed if (v, s) in known}


def _validated(parsed: Parsed, slug: str, suite: Suite) -> LoadedObjective:
    """The code checked by the engine's validator in the sandbox, as the form checks it,
    with the uploaded hyperparameters applied as overrides (they must be the objective's)."""
    from harness.sandbox import SandboxUnavailable, validate_sandboxed

    try:
        validation = validate_sandboxed(parsed.code, code_filename(slug),
                                        parsed.hyperparameters or None)
    except SandboxUnavailable:
        raise UploadError(503, "the server's sandbox is unavailable; nothing was stored, "
                          "try again later") from None
    errors = [p.message for p in validation.problems if p.severity == "error"]
    if errors or validation.objective is None:
        raise bad("the objective did not pass validation: " + "; ".join(errors))
    loaded = dataclasses.replace(validation.objective, name=slug)
    if not suite.supports(loaded.hooks):
        raise bad(f"{suite.name} runs objectives defining {' or '.join(suite.accepted_hooks)}; "
                  f"this one defines {', '.join(loaded.hooks) or 'no hook'}")
    return loaded


def _store(user, parsed: Parsed, suite: Suite, slug: str, loaded: LoadedObjective,
           sample: set[tuple[str, int]]) -> Upload:
    objective, created = Objective.objects.get_or_create(
        slug=slug, defaults={"owner": user, "name": parsed.name,
                             "description": loaded.description})
    if not created and objective.owner_id != user.pk:  # taken since the check above
        raise UploadError(409, f"an objective named {slug!r} exists and is not yours")
    if objective.visibility != parsed.visibility:
        objective.visibility = parsed.visibility
        objective.save(update_fields=["visibility"])
    version, _ = ObjectiveVersion.objects.get_or_create(
        objective=objective, key=loaded.version_key,
        defaults={"code": loaded.source, "code_sha256": loaded.code_sha256,
                  "hyperparameters": dict(loaded.hyperparameters), "label": loaded.label})
    seeds = sorted({s for _, s in sample})
    run = Submission.objects.create(owner=user, version=version, suites=[suite.name],
                                    seeds=len(seeds))
    run.cells.set([queued_cell(version, suite, v, s) for v, s in sorted(sample)])
    upload = Upload.objects.create(owner=user, version=version, suite=suite.name,
                                   suite_version=suite.version, sample=run)
    UploadedCell.objects.bulk_create(
        UploadedCell(upload=upload, variant=c.variant, seed=c.seed, status=c.status,
                     diverged_step=c.diverged_step, wall_time=c.wall_time, metrics=c.metrics,
                     curves=c.curves, environment=c.environment,
                     sampled=(c.variant, c.seed) in sample)
        for c in parsed.cells)
    return upload


def slug_for(name: str) -> str:
    """The slug the local store gives an objective named ``name`` (``harness.storage.store``)."""
    return slugify(name.replace("_", "-"))[:100]
