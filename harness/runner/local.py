"""What a local run is made of: objectives loaded (here or in the sandbox), cell groups
split over worker processes, and what a finished group says went wrong. Storage-free:
:mod:`harness.api` wires these to the results database."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.contract import registry


def load(spec: str, overrides: Mapping[str, Any] | None, sandbox: bool):
    """The objective ``spec`` names. With ``sandbox``, a file is only read here: the sandbox
    loads and checks it (:func:`sandboxed_objective`); built-ins load here (trusted)."""
    from harness.objectives.loading import ObjectiveError, is_file_spec, load_objective

    if sandbox and is_file_spec(spec):
        validation = sandboxed_objective(spec, overrides)
        if validation.objective is None:  # it could not be loaded there
            errors = [p for p in validation.problems if p.severity == "error"]
            raise ObjectiveError(errors[0].code if errors else "sandbox",
                                 "\n".join(p.message for p in errors)
                                 or f"{spec} could not be loaded in the sandbox")
        return validation.objective
    if sandbox and spec not in registry.builtins() and "." in spec:
        raise ObjectiveError("sandbox", f"{spec}: the sandbox runs objective files, and "
                             f"importing a module would run it here; pass its .py file")
    return load_objective(spec, overrides)


def sandboxed_objective(spec: str, overrides: Mapping[str, Any] | None):
    """Validate the file ``spec`` in the sandbox (:func:`harness.sandbox.validate_sandboxed`):
    its :class:`Validation`, whose objective, when the file loaded there, is metadata only
    (no callable hook), named and versioned as :func:`load_objective` would: name from the
    path, code hash from the text read here, hyperparameters from the defaults the sandbox
    reported and ``overrides`` coerced here. Raises :class:`ObjectiveError` for a file that
    is missing or not UTF-8, or overrides that do not fit."""
    from harness.objectives.loading import ObjectiveError, coerce_overrides, read_source
    from harness.sandbox import validate_sandboxed

    path = Path(spec)
    if not path.is_file():
        raise ObjectiveError("not-found", f"objective file {spec} does not exist")
    source = read_source(path)
    validation = validate_sandboxed(source, path.name, overrides or None)
    described = validation.objective
    if described is None:
        return validation
    hyperparameters = {**described.defaults,
                       **coerce_overrides(overrides or {}, described.defaults)}
    validation.objective = replace(described, name=path.stem, source=source,
                                   path=str(path.resolve()), hyperparameters=hyperparameters)
    return validation


def group(spec: str, obj, suite, variants: list[str], seeds: list[int], sandboxed: bool):
    """The :class:`~harness.runner.group.Group` that trains ``obj`` on ``variants`` × ``seeds``."""
    from harness.runner.group import Group

    if sandboxed:  # the text that was checked and is stored; all its hyperparameters
        return Group(obj.path, suite.name, suite.version, tuple(variants), tuple(seeds),
                          tuple(obj.hyperparameters.items()), True, source=obj.source)
    # Its own overrides only (hyperparameters name one objective, not the reference added).
    changed = tuple((k, v) for k, v in obj.hyperparameters.items() if obj.defaults.get(k) != v)
    return Group(obj.path if obj.origin == "file" else spec, suite.name,
                      suite.version, tuple(variants), tuple(seeds), changed, False)


def spread(groups: list[tuple], workers: int) -> list[tuple]:
    """``(label, place, group)`` entries as the worker processes take them. With more than
    one worker, each group is split into one per variant, so that a worker that finishes
    early takes the next variant instead of idling while another trains an objective's
    last variants (with whole objectives as groups, the full sweep's suites kept their two
    workers busy 82–94% of the time), and the groups with the longest time budget
    (``Resources.wall_seconds`` of their members) go first, so that a run ends on short
    ones. Two processes each batching some members beat one process batching all
    (bench/dispatch.py). Results do not depend on the split: every cell trains in its own
    member chunk (harness/contract/chunks.py)."""
    if workers <= 1:
        return list(groups)
    out = [(label, place, replace(g, variants=(v,)))
           for label, place, g in groups for v in g.variants]
    return sorted(out, key=lambda entry: -_budget(entry[2]))  # stable: the plan's order


def _budget(group) -> float:
    from harness.contract.chunks import members_trained

    suite = registry.suite_at(group.suite, group.suite_version)
    return suite.resources.wall_seconds(members_trained(suite, group.variants, group.seeds))


def report_problems(label: str, results, say: Callable[[str], None]) -> None:
    """Tell the user about a group's fallbacks, failures and divergences."""
    modes = {r.info.get("fallback_reason") for r in results if r.info.get("fallback_reason")}
    for reason in modes:
        say(f"{label}: cannot run seed-batched ({reason}); ran a per-seed loop instead")
    failed = [r for r in results if r.status in ("failed", "killed", "timeout")]
    if failed:
        first = failed[0]
        why = f" ({first.status}: {first.reason})" if first.reason else ""
        say(f"{label}: {len(failed)} cells did not finish{why}:\n{first.error}")
        if first.captured:
            say(f"its output:\n{first.captured}")
    diverged = [r for r in results if r.status == "diverged"]
    if diverged:
        say(f"{label}: {len(diverged)} seeds diverged (non-finite loss); see the div column")
