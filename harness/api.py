"""The Python API: what ``harness run``, ``harness results`` and ``harness validate`` do,
callable from a notebook or a script, with results as DataFrames and plotly figures.

    from harness import api

    def classification_loss(logits, targets, *, q: float = 0.7):
        p_y = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
        return (1 - p_y.clamp_min(1e-7) ** q) / q

    api.validate(classification_loss)
    res = api.run(suite, classification_loss, seeds=3)   # a suite name (harness ls)
    res.summary()               # mean [95% CI], P(>reference), ★ … per variant and objective
    res.to_pandas()             # one row per cell and metric
    res.figure("strip")         # the suite page's plot, as a plotly Figure
    api.compare(classification_loss, "gce", suite=suite).to_pandas()

An objective is a file path, a built-in name, a dotted module, or a function defined in
the notebook (captured with its imports as a file, :mod:`harness.capture`, and versioned
by its text like a file). Results go to the same database as the CLI's (SQLite under
``$HARNESS_HOME`` unless ``DATABASE_URL`` says otherwise). The CLI is a thin layer over
this module. With :mod:`harness.results` it is an entry point: the places besides the CLI
that wire the engine to storage (``harness.storage.store``, imported lazily).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.comparison import Comparison
from harness.contract import registry
from harness.objectives.loading import ObjectiveError
from harness.profile import Profile, profile
from harness.results import Results

if TYPE_CHECKING:

    from harness.contract.suite import Suite
    from harness.objectives.validate import Validation

ObjectiveLike = str | os.PathLike | Callable[..., Any]

__all__ = ["Comparison", "HarnessError", "Interrupted", "ObjectiveError", "Results",
           "Profile", "compare", "objective_spec", "profile", "results", "run", "validate"]


class HarnessError(Exception):
    """A request the harness cannot carry out, phrased for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (a notebook's interrupt) during a run, after the user was told what was kept."""


# --- objectives ----------------------------------------------------------------------

def objective_spec(objective: ObjectiveLike, *, hook: str | None = None,
                   suite: Suite | None = None) -> str:
    """What the loaders take for ``objective``: a path or a name as it is, a function
    captured as a file (:func:`harness.capture.capture`). A function not named after a
    hook implements ``hook``, or the suite's hook when it accepts exactly one."""
    if isinstance(objective, os.PathLike):
        return os.fspath(objective)
    if isinstance(objective, str):
        return objective
    if not callable(objective):
        raise HarnessError(f"an objective is a .py file, a built-in name, a dotted module or "
                           f"a function, got {type(objective).__name__}")
    from harness.capture import capture

    name = getattr(objective, "__name__", "")
    known = registry.hooks()
    if hook is None and name not in known:
        accepted = suite.accepted_hooks if suite is not None else ()
        if len(accepted) != 1:
            raise HarnessError(
                f"{name or objective!r} is not named after a hook: name the function after "
                f"the hook it implements ({', '.join(accepted or known)}) or pass hook=")
        hook = accepted[0]
    if hook is not None and hook not in known:
        raise HarnessError(f"no hook {hook!r}: hooks are {', '.join(known)}")
    return str(capture(objective, hook=hook).path)


def validate(objective: ObjectiveLike, *, hyperparameters: Mapping[str, Any] | None = None,
             hook: str | None = None, sandbox: bool = False) -> Validation:
    """Every problem with the objective, as ``harness validate`` reports them (``print``
    it, or read ``.ok`` and ``.problems``). ``sandbox``: load and check a file there, as
    the server does (a function is captured as a file first)."""
    from harness.objectives.loading import is_file_spec
    from harness.objectives.validate import Problem, Validation
    from harness.objectives.validate import validate as check

    try:
        spec = objective_spec(objective, hook=hook)
    except ObjectiveError as exc:
        return Validation(getattr(objective, "__name__", str(objective)),
                          problems=[Problem(exc.code, "error", exc.message)])
    if not sandbox:
        return check(spec, dict(hyperparameters or {}) or None)
    if not is_file_spec(spec):
        raise HarnessError(f"{spec}: the sandbox checks objective files; pass a .py file or "
                           f"a function")
    from harness.objectives.validate import SandboxValidation
    from harness.runner.local import sandboxed_objective
    from harness.sandbox import SandboxUnavailable

    try:
        validation = sandboxed_objective(spec, dict(hyperparameters or {}) or None)
    except ObjectiveError as exc:
        validation = Validation(spec, problems=[Problem(exc.code, "error", exc.message)])
    except SandboxUnavailable as exc:
        raise HarnessError(f"the sandbox is unavailable here: {exc}") from None
    return SandboxValidation(validation.spec, validation.objective, validation.problems)


# --- runs ----------------------------------------------------------------------------

def run(suite: str, objectives: ObjectiveLike | Sequence[ObjectiveLike] | None = None, *,
        variants: Sequence[str] | None = None, seeds: int | Iterable[int] = 5,
        hyperparameters: Mapping[str, Any] | None = None, hook: str | None = None,
        epochs: int | None = None, device: str = "cpu", mode: str = "auto",
        sandbox: bool = False, force: bool = False, workers: int | None = None,
        data_root: str | None = None, download: bool = False,
        row_order_from: str | None = None, factorial: int | None = None,
        tuned: bool = False, sequential: int | None = None, progress: str | bool = "auto",
        say: Callable[[str], None] = print) -> Results:
    """Train every (objective, variant, seed) cell not yet stored, store it, and return
    the results of these objectives (and the suite's reference, always run with them).

    ``objectives``: one or a list (default: the suite's own baselines); ``seeds``: a
    number N (seeds 0…N−1) or the seeds themselves; ``hyperparameters``: overrides for a
    single objective (``--set``); ``epochs``: a shortened smoke run, stored apart (suite
    version V+eN); ``sandbox``: train objective files in the server's sandbox;
    ``factorial``: N levels of every seed stream instead of ``seeds`` (see
    :meth:`Results.variance`); ``tuned``: the suite's tuned protocol (harness/runner/tuning.py,
    stored apart as V+tunedK); ``sequential``: seeds added a chunk at a time up to that
    cap where a verdict is undecided (harness/sequential_run.py, instead of ``seeds``);
    ``progress``: "auto" (a notebook or terminal bar),
    "notebook", "terminal" or False; ``say``: where notes go (held-out variants, cells
    skipped, failures). Interrupted (Ctrl-C, a notebook's ■), the finished groups stay
    stored and the group in training is discarded whole: :class:`Interrupted` is raised.
    """
    suite_obj = _suite(suite, epochs)
    variants = list(variants or suite_obj.default_variants)
    for v in variants:
        _variant(suite_obj, v)
    held = [v.name for v in suite_obj.held_out]
    _refuse_held_out(variants, held)
    if held and variants == list(suite_obj.default_variants):
        say(f"held out (run only on the server, from its secret): {', '.join(held)}")
    given = [objectives] if isinstance(objectives, str | os.PathLike) or callable(objectives) \
        else list(objectives or suite_obj.baselines)
    if hyperparameters and len(given) != 1:
        raise HarnessError("hyperparameters apply to one objective: pass exactly one")
    if row_order_from and not sandbox:
        raise HarnessError("row_order_from sets the sandbox's row order: it needs sandbox")
    specs = [objective_spec(o, hook=hook, suite=suite_obj) for o in given]
    loaded = _load_all(specs, hyperparameters, sandbox)
    unusable = [o for o in loaded if not suite_obj.supports(o.hooks)]
    if unusable:
        raise HarnessError("; ".join(
            f"{o.name} defines {', '.join(o.hooks) or 'no hook'}, but the {suite_obj.name} "
            f"suite runs only objectives defining {' or '.join(suite_obj.accepted_hooks)}"
            for o in unusable))
    if factorial is not None:
        seed_list = _factorial_seeds(suite_obj, factorial, seeds)
    else:
        seed_list = _seed_list(seeds)
        if suite_obj.reference not in {o.name for o in loaded}:
            from harness.objectives.loading import load_objective

            loaded.insert(0, load_objective(suite_obj.reference))  # P(improvement) needs it
            specs.insert(0, suite_obj.reference)
    setup()
    if tuned or sequential:
        from harness import sequential_run, tuned_run

        return tuned_run.train_tuned(suite_obj, specs, loaded, variants, seed_list, locals(
        )) if tuned else sequential_run.train_sequential(
            suite_obj, specs, loaded, variants, sequential, locals())
    plan = _Plan(suite_obj, specs, loaded, variants, seed_list)
    versions = _train([plan], factorial is not None, device=device, mode=mode,
                      sandbox=sandbox, force=force, workers=workers, data_root=data_root,
                      download=download, row_order_from=row_order_from, progress=progress,
                      say=say)[0]
    return Results(suite_obj, versions, variants, factorial=factorial is not None)


@dataclass(frozen=True)
class _Plan:
    """What one suite trains: objectives (``specs`` as given, ``loaded``), variants, seeds."""

    suite: Suite
    specs: list[str]
    loaded: list[Any]
    variants: list[str]
    seeds: list[int]


def _train(plans: list[_Plan], factorial: bool = False, *, device: str = "cpu",
           mode: str = "auto", sandbox: bool = False, force: bool = False,
           workers: int | None = None, data_root: str | None = None, download: bool = False,
           row_order_from: str | None = None, progress: str | bool = "auto",
           say: Callable[[str], None] = print) -> list[list[Any]]:
    """Train the cells of every plan not yet stored, under one progress bar; the stored
    versions, per plan and objective."""
    from harness import progress as bars
    from harness.runner import local as running
    from harness.runner.environment import environment
    from harness.runner.jobs import prepare_fixtures
    from harness.runner.processes import default_workers, run_groups, workers_for_caller
    from harness.storage import store

    device = _device(device)
    env = environment(device)
    if factorial:
        finished, save = store.finished_factorial, store.store_factorial
    else:
        finished, save = store.finished_cells, store.store_results
    workers = workers_for_caller(workers or default_workers(), say)
    versions, groups, asked = [], [], 0  # groups: (label, (version, suite), Group)
    for plan in plans:
        suite, variants, seeds = plan.suite, plan.variants, plan.seeds
        versions.append([])
        asked += len(plan.loaded) * len(variants) * len(seeds)
        for spec, obj in zip(plan.specs, plan.loaded, strict=True):
            version = store.version_for(obj)
            versions[-1].append(version)
            done = set() if force else finished(version, suite, variants, seeds)
            todo = [v for v in variants if any((v, s) not in done for s in seeds)]
            if todo:
                sandboxed = sandbox and obj.origin != "builtin"
                group = running.group(spec, obj, suite, todo, seeds, sandboxed)
                if sandboxed and row_order_from:
                    group = replace(group, row_secret=_server_row_key(row_order_from, obj))
                groups.append((obj.label, (version, suite), group))
    groups = running.spread(groups, workers)
    owner = {id(g): (label, place) for label, place, g in groups}
    total = sum(g.cells for _, _, g in groups)
    skipped = asked - total
    if skipped:
        say(f"{skipped} cells already stored (rerun them with --force, or force=True)")
    options = {"device": device, "mode": mode, "data_root": data_root, "download": download}
    unavailable = _sandbox_unavailable() if sandbox else ()
    try:
        for plan in plans:
            pending = {v for _, (_, suite), g in groups if suite is plan.suite
                       for v in g.variants}
            if pending:
                built = prepare_fixtures(
                    plan.suite, [plan.suite.variant(v) for v in plan.variants if v in pending],
                    plan.seeds, data_root=data_root, download=download, workers=workers,
                    say=say)
                if built:
                    say(f"fixtures: {built}")
        with bars.bar(total, progress) as advance:
            def stored(group, results) -> None:
                label, (version, suite) = owner[id(group)]
                save(version, suite, results, env)
                running.report_problems(label, results, say)

            run_groups([g for _, _, g in groups], workers=workers, options=options,
                       on_progress=lambda g, cells: advance(owner[id(g)][0])(cells),
                       on_done=stored)
    except FileNotFoundError as exc:  # a real dataset that is not there
        raise HarnessError(str(exc)) from None
    except unavailable as exc:  # e.g. HARNESS_SANDBOX_STRICT=1 on a machine without it
        raise HarnessError(f"the sandbox is unavailable here: {exc}") from None
    except KeyboardInterrupt:
        say("interrupted: finished cells are stored; the unfinished group was discarded")
        raise Interrupted() from None
    return versions


# --- stored results ------------------------------------------------------------------

def results(suite: str, objectives: ObjectiveLike | Sequence[ObjectiveLike] | None = None,
            *, variants: Sequence[str] | None = None, epochs: int | None = None) -> Results:
    """Stored results on ``suite`` (of a smoke run with ``epochs``): of ``objectives``
    (names, labels such as ``gce(q=0.5)``, files or functions, by name) or, by default,
    of every objective's latest version, as the leaderboard lists them."""
    suite_obj = _suite(suite, epochs)
    for v in variants or ():
        _variant(suite_obj, v)
    setup()
    from harness.storage import store

    versions = store.latest_versions(suite_obj)
    if objectives is not None:
        wanted = [objectives] if isinstance(objectives, str | os.PathLike) \
            or callable(objectives) else list(objectives)
        chosen = []
        for o in wanted:
            name = _name_of(o)
            found = [v for v in versions if name in (v.label, v.objective.name,
                                                     v.objective.slug)]
            if not found:
                raise HarnessError(f"no stored results of {name!r} on {suite_obj.name} "
                                   f"v{suite_obj.version}")
            chosen += found
        versions = list({v.id: v for v in chosen}.values())
    return Results(suite_obj, versions, list(variants) if variants else None)


def compare(a: ObjectiveLike, b: ObjectiveLike, *, suite: str,
            epochs: int | None = None) -> Comparison:
    """``a`` against ``b`` on ``suite`` (both already run), per variant on paired seeds."""
    suite_obj = _suite(suite, epochs)
    setup()
    from harness.storage import store
    from webapp.leaderboard import lookup, profiles

    slugs = [store.slug_for(_name_of(x)) for x in (a, b)]
    try:
        return Comparison(profiles.compare(*slugs, suite_obj))
    except lookup.NotFound as exc:
        raise HarnessError(str(exc)) from None


# --- helpers -------------------------------------------------------------------------

def setup() -> None:
    """Django and the results database, migrated (once per process)."""
    global _ready
    if _ready:
        return
    from django.apps import apps

    if apps.ready:  # a host configured Django (the web app, a worker, pytest): its database
        _ready = True
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness.storage.settings")
    if _event_loop_running():
        # A Jupyter kernel runs cells inside its event loop, where Django refuses database
        # calls; they are synchronous here by design, as Django's docs advise for notebooks.
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    _ready = True


_ready = False


def _event_loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _suite(name: str, epochs: int | None) -> Suite:
    try:
        suite = registry.get_suite(name)
    except KeyError:
        raise HarnessError(f"no suite {name!r} (suites: "
                           f"{', '.join(registry.suite_names())})") from None
    if epochs is not None:
        if epochs < 1:
            raise HarnessError(f"epochs must be at least 1, got {epochs}")
        suite = suite.shortened(epochs)
    return suite


def _variant(suite: Suite, name: str) -> None:
    try:
        suite.variant(name)
    except KeyError as exc:
        raise HarnessError(str(exc.args[0]) if exc.args else f"no variant {name!r}") from None


def _refuse_held_out(variants: list[str], held: list[str]) -> None:
    from harness.contract import heldout
    asked = [v for v in variants if v in held]
    if asked and not heldout.available():
        raise HarnessError(f"{', '.join(asked)}: held out. Its split and draws come from "
                           f"the server's secret, so it runs only on the server, for every "
                           f"ranked submission; its result shows there beside its public twin")


def _load_all(specs: list[str], hyperparameters, sandbox: bool) -> list[Any]:
    from harness.runner import local as running
    unavailable = _sandbox_unavailable() if sandbox else ()
    overrides = dict(hyperparameters or {}) or None  # typed, or text cast by the default's type
    try:
        return [running.load(s, overrides, sandbox) for s in specs]
    except unavailable as exc:
        raise HarnessError(f"the sandbox is unavailable here: {exc}") from None


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, int):
        if seeds < 1:
            raise HarnessError(f"seeds must be at least 1, got {seeds}")
        return list(range(seeds))
    chosen = sorted(set(seeds))
    if not chosen or any(not isinstance(s, int) or s < 0 for s in chosen):
        raise HarnessError(f"seeds are integers from 0, got {seeds!r}")
    return chosen


def _factorial_seeds(suite: Suite, levels: int, seeds: int | Iterable[int]) -> list[int]:
    from harness.contract.seeding import MAX_LEVELS, factorial_seeds

    if not suite.seed_streams:
        raise HarnessError(f"the {suite.name} suite declares no seed streams "
                           f"(Suite.seed_streams), so its variance cannot be split by source")
    if not isinstance(levels, int) or not 2 <= levels < MAX_LEVELS:
        raise HarnessError(f"factorial needs 2 to {MAX_LEVELS - 1} levels per stream, "
                           f"got {levels}")
    return factorial_seeds(suite.seed_streams, levels)


def _device(name: str) -> str:
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise HarnessError("device cuda asked for, but torch sees no CUDA device")
    elif name != "cpu":
        raise HarnessError(f"device is cpu, cuda or cuda:N, got {name!r}")
    return name


def _server_row_key(server: str, obj) -> str:
    from harness import upload

    try:
        return upload.row_key(server, os.environ.get("HARNESS_TOKEN", ""), obj.version_key)
    except upload.UploadFailed as exc:
        raise HarnessError(f"the row order of {server}: {exc}") from None


def _sandbox_unavailable() -> type[Exception]:
    from harness.sandbox import SandboxUnavailable

    return SandboxUnavailable


def _name_of(objective: ObjectiveLike) -> str:
    if isinstance(objective, os.PathLike) or (isinstance(objective, str) and (
            objective.endswith(".py") or os.sep in objective)):
        return Path(objective).stem
    if isinstance(objective, str):
        return objective
    return getattr(objective, "__name__", str(objective))


