"""Load an objective from a file path, a dotted module or a built-in name.

Loading never imports torch itself; the objective's own module does. Every
problem becomes an :class:`ObjectiveError` with a message a user can act on.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import json
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract import registry


class ObjectiveError(Exception):
    """A problem with an objective, phrased for its author."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self):  # raised in a worker process, it crosses back pickled
        return type(self), (self.code, self.message)


def version_key_of(source: str, hyperparameters: Mapping[str, Any]) -> str:
    """The version key of a code text with its (complete) hyperparameters."""
    payload = json.dumps({"code": hashlib.sha256(source.encode()).hexdigest(),
                          "hp": dict(hyperparameters)}, sort_keys=True, default=repr)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class LoadedObjective:
    name: str
    origin: str  # "builtin" | "file" | "module"
    source: str
    hooks: Mapping[str, Callable]
    defaults: Mapping[str, Any]
    hyperparameters: Mapping[str, Any]
    description: str = ""
    path: str = ""
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The module's ``MODEL`` as declared (None when it declares none): suites that let an
    # objective choose model settings read and check it (certified, tta, unlearning).
    model: Any = None
    # The module's ``SEARCH_SPACE`` (:mod:`harness.objectives.search`), checked against the
    # hyperparameters; {} where it declares none (a tuned run then tunes only the suite's
    # settings for it).
    search_space: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dimensions(self) -> tuple[Any, ...]:
        """The search space's dimensions, in declaration order."""
        from harness.objectives.search import parse

        return parse(self.search_space)

    @property
    def code_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def version_key(self) -> str:
        """Identity of (code, hyperparameters): equal keys give equal results."""
        return version_key_of(self.source, self.hyperparameters)

    @property
    def label(self) -> str:
        """Display name; hyperparameters that differ from the defaults are shown."""
        changed = {k: v for k, v in self.hyperparameters.items() if self.defaults.get(k) != v}
        if not changed:
            return self.name
        return self.name + "(" + ", ".join(f"{k}={v}" for k, v in sorted(changed.items())) + ")"

    def wants(self, hook: str, context_name: str) -> bool:
        return context_name in self.context.get(hook, ())

    def bind(self, hook: str) -> Callable:
        """The hook with hyperparameters filled in; context is passed only if asked for."""
        fn = self.hooks[hook]
        hp = {k: v for k, v in self.hyperparameters.items() if k in _hyperparameter_names(hook, fn)}
        wanted = self.context.get(hook, ())

        def bound(*args: Any, hyper: Mapping[str, Any] | None = None, **context: Any) -> Any:
            # hyper: this member's own values (a tuned run's trial), as tensors
            values = hp if not hyper else {**hp, **{k: v for k, v in hyper.items() if k in hp}}
            if hyper and not getattr(fn, "takes_hyperparameters", True):
                raise ValueError(f"{self.name}.{hook} is served from the sandbox with the "
                                 f"hyperparameters it was loaded with; a run whose members "
                                 f"differ in them trains in-process")
            return fn(*args, **values, **{k: v for k, v in context.items() if k in wanted})

        bound.__name__ = f"{self.name}.{hook}"
        bound.context = wanted  # what the trainer has to compute for it
        if hasattr(fn, "each_member"):  # served from the sandbox: one call for all members
            bound.each_member = lambda *args, **context: fn.each_member(
                *args, **hp, **{k: v for k, v in context.items() if k in wanted})
        return bound


def load_objective(spec: str, overrides: Mapping[str, Any] | None = None) -> LoadedObjective:
    """Resolve ``spec`` (file path, built-in name, or dotted module) and apply overrides."""
    path = Path(spec)
    if is_file_spec(spec):
        if not path.is_file():
            raise ObjectiveError("not-found", f"objective file {spec} does not exist")
        module, source = _load_file(path)
        name, origin, where = path.stem, "file", str(path.resolve())
    elif spec in registry.builtins():
        builtin = registry.builtins()[spec]
        where = str(builtin.path)
        module = importlib.import_module(builtin.module)
        source, name, origin = builtin.path.read_text(), spec, "builtin"
    elif "." in spec:
        module = _import_module(spec)
        where = getattr(module, "__file__", "") or ""
        source = Path(where).read_text() if where else inspect.getsource(module)
        name, origin = spec.rsplit(".", 1)[-1], "module"
    else:
        raise ObjectiveError(
            "not-found",
            f"unknown objective {spec!r}: not a .py file, not a built-in "
            f"({', '.join(registry.builtins())}), and not a dotted module path")
    return objective_from_module(module, source, name=name, origin=origin, path=where,
                                 overrides=overrides)


def objective_from_module(module: types.ModuleType, source: str, *, name: str, origin: str,
                          path: str = "", overrides: Mapping[str, Any] | None = None
                          ) -> LoadedObjective:
    known = registry.hooks()
    hooks = {h: getattr(module, h) for h in known if callable(getattr(module, h, None))}
    if not hooks:
        raise ObjectiveError("no-hook", _no_hook_message(module))
    defaults: dict[str, Any] = {}
    context: dict[str, tuple[str, ...]] = {}
    for hook, fn in hooks.items():
        defaults.update(check_signature(hook, fn))
        params = inspect.signature(fn).parameters
        context[hook] = tuple(c for c in known[hook].context if c in params)
    hyperparameters = {**defaults, **coerce_overrides(overrides or {}, defaults)}
    doc = (inspect.getdoc(module) or "").strip().splitlines()
    return LoadedObjective(name=name, origin=origin, source=source, hooks=hooks,
                           defaults=defaults, hyperparameters=hyperparameters,
                           description=doc[0] if doc else "", path=path, context=context,
                           model=getattr(module, "MODEL", None),
                           search_space=search_space_of(module, defaults))


def search_space_of(module: types.ModuleType, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The module's ``SEARCH_SPACE``, checked against the hyperparameters' defaults."""
    from harness.objectives.search import SearchSpaceError, parse

    space = getattr(module, "SEARCH_SPACE", None)
    if space is None:
        return {}
    try:
        parse(space, defaults=defaults)
    except SearchSpaceError as exc:
        raise ObjectiveError("search-space", str(exc)) from exc
    return {k: dict(v) for k, v in space.items()}


def check_signature(hook: str, fn: Callable) -> dict[str, Any]:
    """Check a hook's signature against the contract; return its hyperparameter defaults."""
    spec = registry.hooks()[hook]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ObjectiveError("signature", f"{hook}: cannot read its signature ({exc})") from exc
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    expected = ", ".join(spec.positional)
    if len(positional) < len(spec.positional):
        raise ObjectiveError(
            "signature", f"{hook} must take ({expected}) as its first arguments; "
            f"it takes ({', '.join(p.name for p in positional)})")
    extra = [p.name for p in positional[len(spec.positional):] if p.default is p.empty]
    if extra:
        raise ObjectiveError(
            "signature", f"{hook} has extra positional argument(s) without a default: "
            f"{', '.join(extra)}; make hyperparameters keyword-only with defaults, "
            f"e.g. def {hook}({expected}, *, {extra[0]}=...)")
    defaults = {}
    for p in params:
        if p.name == "index" and p.name not in spec.context:
            raise ObjectiveError(
                "signature", f"{hook} asks for 'index': hooks are no longer told which "
                f"training samples they get; per-sample memory comes as 'state', this batch's "
                f"slice, which the trainer stores back after the call")
        if p.kind == p.KEYWORD_ONLY and p.name not in spec.context:
            if p.default is p.empty:
                offered = ", ".join(spec.context) or "none"
                raise ObjectiveError(
                    "signature", f"{hook}: {p.name!r} is not context this hook receives "
                    f"(it may ask for: {offered}), so it is a hyperparameter, and it has no "
                    f"default; every keyword-only hyperparameter needs one (the author's "
                    f"choice)")
            defaults[p.name] = p.default
        elif (p.kind == p.POSITIONAL_OR_KEYWORD and p in positional[len(spec.positional):]
              and p.name not in spec.context):
            defaults[p.name] = p.default
    return defaults


def coerce_overrides(overrides: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Check override names against the hyperparameters; cast strings by the default's type."""
    out = {}
    for key, value in overrides.items():
        if key not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise ObjectiveError("unknown-hyperparameter",
                                 f"unknown hyperparameter {key!r} (this objective has: {known})")
        out[key] = _cast(value, defaults[key], key)
    return out


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``["q=0.5", "name=x"]`` → ``{"q": 0.5, "name": "x"}`` (Python literals where possible)."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ObjectiveError("bad-override", f"--set expects key=value, got {item!r}")
        if key.strip() in out:  # not last-wins: one of the two was a mistake
            raise ObjectiveError("bad-override", f"hyperparameter {key.strip()!r} is set "
                                 f"twice; set it once")
        try:
            out[key.strip()] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = raw.strip()
    return out


def _cast(value: Any, default: Any, key: str) -> Any:
    if isinstance(default, bool):
        return _cast_bool(value, default, key)
    if default is None or isinstance(value, type(default)):
        return value
    if isinstance(default, float) and isinstance(value, int):
        return float(value)
    raise ObjectiveError("bad-override", f"hyperparameter {key!r} expects "
                         f"{type(default).__name__} (default {default!r}), got {value!r}")


def _cast_bool(value: Any, default: bool, key: str) -> bool:
    # "--set flag=false" parses to the string "false", which is truthy: never pass it through.
    if isinstance(value, bool):
        return value
    words = {"true": True, "false": False}
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    raise ObjectiveError("bad-override", f"hyperparameter {key!r} expects "
                         f"bool (default {default!r}), got {value!r}")


def _hyperparameter_names(hook: str, fn: Callable) -> set[str]:
    context = registry.hooks()[hook].context
    return {n for n in inspect.signature(fn).parameters if n not in context}


def read_source(path: Path) -> str:
    """An objective file's text, read as loading reads it (without running it): the
    text :attr:`LoadedObjective.code_sha256` and :attr:`LoadedObjective.version_key` are
    computed from, so a file checked and trained in the sandbox is stored under the same version."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ObjectiveError("encoding", f"{path}: not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from exc


def is_file_spec(spec: str) -> bool:
    """Whether :func:`load_objective` takes ``spec`` for a file (tested before any other
    reading, as there)."""
    return spec.endswith(".py") or Path(spec).is_file()


def _load_file(path: Path) -> tuple[types.ModuleType, str]:
    source = read_source(path)
    # Compile under the resolved path, which is LoadedObjective.path, so that
    # user_traceback(exc, objective.path) finds the user's frames.
    filename = str(path.resolve())
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise ObjectiveError("syntax", _syntax_message(exc, path.name)) from exc
    module = types.ModuleType(f"harness_user_objective_{path.stem}")
    module.__file__ = filename
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        raise ObjectiveError("import", f"{path.name} raised {type(exc).__name__} while "
                             f"loading: {exc}\n{user_traceback(exc, filename)}") from exc
    return module, source


def _syntax_message(exc: SyntaxError, filename: str) -> str:
    where = f" at line {exc.lineno}" if exc.lineno else ""
    where += f", column {exc.offset}" if exc.lineno and exc.offset else ""
    text = (exc.text or "").rstrip()
    return (f"syntax error in {filename}{where}: {exc.msg}"
            + (f"\n    {text}" if text else ""))


def _import_module(dotted: str) -> types.ModuleType:
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == dotted or dotted.startswith(missing + "."):
            raise ObjectiveError("not-found", f"cannot import module {dotted!r}: {exc}") from exc
        raise ObjectiveError("import", _module_import_message(dotted, exc)) from exc
    except SyntaxError as exc:
        name = Path(exc.filename).name if exc.filename else dotted
        raise ObjectiveError("syntax", _syntax_message(exc, name)) from exc
    except Exception as exc:
        raise ObjectiveError("import", _module_import_message(dotted, exc)) from exc


def _module_import_message(dotted: str, exc: Exception) -> str:
    try:
        origin = getattr(importlib.util.find_spec(dotted), "origin", None) or ""
    except Exception:
        origin = ""
    lines = user_traceback(exc, origin) if origin else ""
    return (f"module {dotted} raised {type(exc).__name__} while loading: {exc}"
            + (f"\n{lines}" if lines else ""))


def _no_hook_message(module: types.ModuleType) -> str:
    import difflib

    names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
             and getattr(v, "__module__", None) == module.__name__]
    hooks = registry.hooks()
    known = ", ".join(f"{h}{spec.summary.split(' ->')[0]}" for h, spec in hooks.items())
    msg = f"no known hook: define one of {known}"
    for n in names:
        # 0.75: a typo of a hook, not any name ending in "_loss" ("my_loss" ≠ "tta_loss")
        close = difflib.get_close_matches(n, list(hooks), n=1, cutoff=0.75)
        if close:
            return msg + f" (found {n!r}: did you mean {close[0]!r}?)"
    if names:
        msg += f" (found functions: {', '.join(sorted(names))})"
    return msg


def user_traceback(exc: BaseException, filename: str) -> str:
    """The traceback lines that point into the user's file, formatted like Python's."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    if not frames:
        return ""
    lines = traceback.format_list(frames)
    return "".join(lines).rstrip()


def module_file_of(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return code.co_filename if code else ""

