"""``harness run suite NAME --tuned`` (``api.run(..., tuned=True)``): the tuned protocol
(:mod:`harness.runner.tuning`) for every (objective, variant) whose final cells are not
stored yet, over the worker processes, each pair's trial cells and final cells stored as
it ends (an interrupted run keeps the pairs that ended)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.contract.suite import Suite


def check_tunable(suite: Suite, loaded: list[Any], sandbox: bool,
                  factorial: int | None) -> None:
    """Refuse, with the reason, a tuned run the protocol cannot make."""
    from harness.api import HarnessError
    from harness.contract.registry import all_suites

    if suite.tuning is None:
        raise HarnessError(f"the {suite.name} suite declares no tuned protocol (suites with "
                           f"one: {', '.join(s.name for s in all_suites() if s.tuning)})")
    if factorial is not None:
        raise HarnessError("a tuned run chooses settings; a factorial run varies the seeds' "
                           "sources at fixed settings: drop --factorial")
    untrained = [o.name for o in loaded if not suite.tunes(o.hooks)]
    if untrained:  # a lifted hook trains too (certified's CE)
        raise HarnessError(f"the tuned protocol on {suite.name} tunes objectives defining "
                           f"{' or '.join(suite.tunable_hooks)}; not: {', '.join(untrained)}")
    from harness.contract.registry import pipeline

    binds = pipeline(suite).binds_choices
    for o in loaded:
        served = sandbox and o.origin != "builtin"  # the servers bind each trial's values
        words = [] if served or binds else [
            d.name for d in o.dimensions if d.kind == "choice" and not all(
                isinstance(c, int | float) and not isinstance(c, bool) for c in d.choices)]
        if words:  # the trials train as one batch: only numbers differ between members
            raise HarnessError(f"{o.name}: a tuned run batches its trials, and members "
                               f"differ in numbers only; {', '.join(words)} choose between "
                               f"non-numbers (declare numeric choices or fix them)")
        fixed = [k for k in o.search_space if k in o.hyperparameters
                 and o.hyperparameters[k] != o.defaults.get(k)
                 and "fixed" not in o.search_space[k]]
        if fixed:
            raise HarnessError(f"{o.name}: --set {', '.join(fixed)} sets what the tuned run "
                               f"tunes (its SEARCH_SPACE): drop --set for a tuned run")


def train_tuned(suite: Suite, specs: list[str], loaded: list[Any], variants: list[str],
                seeds: list[int], asked: dict[str, Any]) -> Any:
    """Tune and evaluate every (objective, variant) not stored yet (``asked``: the rest of
    :func:`harness.api.run`'s arguments); the results of the tuned track."""
    from harness.api import HarnessError, Results, _device

    if asked.get("sequential"):
        raise HarnessError("a tuned run trains its final seeds as asked: drop --sequential")
    check_tunable(suite, loaded, asked["sandbox"], asked["factorial"])
    options = {"device": _device(asked["device"]), "mode": asked["mode"],
               "data_root": asked["data_root"], "download": asked["download"]}
    versions = _tune(suite, specs, loaded, variants, seeds, workers=asked["workers"],
                     force=asked["force"], options=options, say=asked["say"],
                     sandbox=asked["sandbox"])
    return Results(suite.tuned(), versions, variants)


def _tune(suite: Suite, specs: list[str], loaded: list[Any], variants: list[str],
          seeds: list[int], *, workers: int | None, force: bool, options: dict[str, Any],
          say: Callable[[str], None], sandbox: bool = False) -> list[Any]:
    """The objectives' stored versions (their default versions: a tuned cell records the
    trial it ran), once every pair not stored is tuned and stored. ``sandbox``: objective
    files' losses served from the sandbox (:mod:`harness.runner.tuning_sandboxed`)."""
    from harness.runner import local as running
    from harness.runner.environment import environment
    from harness.runner.processes import default_workers, map_in_workers, workers_for_caller
    from harness.storage import store

    final = suite.tuned()
    versions, calls = [], []
    for spec, objective in zip(specs, loaded, strict=True):
        version = store.version_for(objective)
        versions.append(version)
        done = set() if force else store.finished_cells(version, final, variants, seeds)
        for variant in variants:
            if any((variant, s) not in done for s in seeds):
                calls.append((version, objective.label, (
                    running.group(spec, objective, final, [variant], seeds,
                                  sandbox and objective.origin != "builtin"), options)))
    skipped = len(loaded) * len(variants) - len(calls)
    if skipped:
        say(f"{skipped} (objective, variant) pairs already tuned and stored (rerun them with "
            f"--force)")
    if not calls:
        return versions
    k = suite.tuning.k
    say(f"tuning {len(calls)} (objective, variant) pair{'s' * (len(calls) > 1)}: {k} trials × "
        f"{len(suite.tuning.search_seeds)} search seeds each on {suite.tuning.validation_text}, "
        f"then the "
        f"chosen trial on {len(seeds)} seeds")
    env = environment(options.get("device", "cpu"))
    workers = workers_for_caller(workers or default_workers(), say)

    def stored(i: int, tuned: Any) -> None:  # each pair as it ends: Ctrl-C keeps those
        version, label, _ = calls[i]
        for index, cells in tuned.searched.items():
            store.store_results(version, suite.trial(index), cells, env)
        store.store_results(version, final, tuned.final, env)
        chosen = "no trial (every one failed)" if tuned.chosen is None else (
            f"trial {tuned.chosen}: " + ", ".join(
                f"{n}={v:.3g}" if isinstance(v, float) else f"{n}={v}" for n, v in {
                    **tuned.trials[tuned.chosen].settings,
                    **tuned.trials[tuned.chosen].hyperparameters}.items()))
        say(f"{label} on {tuned.variant}: {chosen} ({tuned.wall_time:.0f} s)")

    try:
        map_in_workers(tune_one, [c[2] for c in calls], workers=workers, on_result=stored)
    except KeyboardInterrupt:
        from harness.api import Interrupted

        say("interrupted: the pairs already tuned are stored; the others were discarded")
        raise Interrupted() from None
    return versions


def tune_one(group: Any, options: dict[str, Any]) -> Any:
    """The tuned protocol for a group of one variant (a worker process's call)."""
    from harness.runner.group import run_tuned_group

    (tuned,) = run_tuned_group(group, **options)
    return tuned


def tune_plans(plans: list[Any], *, device: str, mode: str, sandbox: bool,
               workers: int | None, say: Callable[[str], None]) -> list[list[Any]]:
    """Each plan (:class:`harness.api._Plan`) on its suite's tuned track, pairs not stored
    tuned and stored; per plan its objectives' stored versions (``harness profile
    --tuned``)."""
    from harness.api import _device

    options = {"device": _device(device), "mode": mode, "data_root": None, "download": False}
    return [_tune(p.suite, p.specs, p.loaded, p.variants, p.seeds, workers=workers,
                  force=False, options=options, say=say, sandbox=sandbox) for p in plans]
