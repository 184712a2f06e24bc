"""The suite registry: the one place shared code finds suites, hooks and built-ins.

The engine owns the mechanism; suite packages register themselves. The project's suite
packages are listed by one line, ``PACKAGES`` in the top-level ``suites`` package
(looked up by name here, never imported statically); ``HARNESS_SUITES`` (comma-separated
package names) adds more, e.g. a plugin's or a test's. Each package's ``__init__``
defines ``SUITE`` (a :class:`harness.contract.suite.Suite`), which is cheap to import (no torch).

From those declarations come:

- the hooks an objective may define: the engine's (``harness.objectives.spec``) and
  every suite's ``hook_specs``;
- the built-in objectives: the engine's classification losses
  (``harness/objectives/builtin/``) and each suite's ``baselines/`` folder, one file per
  objective, named by the file;
- the modules the sandbox's fork server imports before any job (every pipeline).

Everything is checked on first use: duplicate suite, hook or built-in names, a hook a
suite calls but nobody declares, a baseline that is not a built-in or does not define a
hook the suite accepts. A mistake fails loudly with :class:`harness.contract.suite.SuiteError`.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.contract.suite import Suite, SuiteError
from harness.objectives.spec import ENGINE_HOOKS, HookSpec

if TYPE_CHECKING:
    from harness.contract.pipeline import Pipeline

# Where the project lists its suite packages: the registry line lives there.
PROJECT_SUITES = "suites:PACKAGES"
ENV = "HARNESS_SUITES"
ENGINE_BUILTINS = Path(__file__).parents[1] / "objectives" / "builtin"
ENGINE_BUILTIN_MODULE = "harness.objectives.builtin"

_added: list[str] = []


@dataclass(frozen=True)
class Builtin:
    """A built-in objective: its file and the module it is imported as."""

    name: str
    path: Path
    module: str
    suite: str | None  # the suite whose baselines/ folder holds it; None: the engine's


@dataclass(frozen=True)
class _Registry:
    suites: MappingProxyType  # name -> Suite
    packages: MappingProxyType  # suite name -> package
    hooks: MappingProxyType  # hook name -> HookSpec
    builtins: MappingProxyType  # objective name -> Builtin (display order)


def packages() -> tuple[str, ...]:
    """Every registered suite package, in registration order."""
    module, _, attr = PROJECT_SUITES.partition(":")
    listed = tuple(getattr(importlib.import_module(module), attr))
    extra = [p.strip() for p in os.environ.get(ENV, "").split(",") if p.strip()]
    return tuple(dict.fromkeys((*listed, *extra, *_added)))


def add_packages(names: list[str] | tuple[str, ...]) -> None:
    """Register more suite packages in this process (the sandbox child gets its parent's
    list this way, since its environment is scrubbed)."""
    for name in names:
        if name not in _added:
            _added.append(name)


def _registry() -> _Registry:
    return _load(packages())


@lru_cache(maxsize=8)
def _load(names: tuple[str, ...]) -> _Registry:
    suites: dict[str, Suite] = {}
    owners: dict[str, str] = {}
    for package in names:
        suite = getattr(importlib.import_module(package), "SUITE", None)
        if not isinstance(suite, Suite):
            raise SuiteError(f"suite package {package} defines no SUITE = Suite(...)")
        if suite.name in suites:
            raise SuiteError(f"two packages declare suite {suite.name!r}: "
                             f"{owners[suite.name]} and {package}")
        suites[suite.name], owners[suite.name] = suite, package
    hooks = _hooks(suites)
    builtins = _builtins(suites, owners, hooks)
    for suite in suites.values():
        _check_suite(suite, hooks, builtins)
    return _Registry(MappingProxyType(suites), MappingProxyType(owners),
                     MappingProxyType(hooks), MappingProxyType(builtins))


def _hooks(suites: dict[str, Suite]) -> dict[str, HookSpec]:
    hooks: dict[str, HookSpec] = {h.name: h for h in ENGINE_HOOKS}
    for suite in suites.values():
        for spec in suite.hook_specs:
            if spec.name in hooks and hooks[spec.name] != spec:
                raise SuiteError(f"suite {suite.name!r} redeclares hook {spec.name!r}")
            hooks[spec.name] = spec
    for spec in hooks.values():
        if ":" not in spec.smoke:
            raise SuiteError(f"hook {spec.name!r}: smoke must be 'module:function'")
    return hooks


def _builtins(suites: dict[str, Suite], owners: dict[str, str],
              hooks: dict[str, HookSpec]) -> dict[str, Builtin]:
    order = importlib.import_module(ENGINE_BUILTIN_MODULE).ORDER
    found = [Builtin(n, ENGINE_BUILTINS / f"{n}.py", f"{ENGINE_BUILTIN_MODULE}.{n}", None)
             for n in order]
    for name, suite in suites.items():
        package = _folder(owners[name])
        folder = package / "baselines" if package is not None else None
        if folder is None or not folder.is_dir():
            continue
        files = {p.stem: p for p in folder.glob("*.py") if not p.stem.startswith("_")}
        ordered = [n for n in suite.baselines if n in files] + sorted(
            n for n in files if n not in suite.baselines)
        found += [Builtin(n, files[n], f"{owners[name]}.baselines.{n}", name) for n in ordered]
    out: dict[str, Builtin] = {}
    for b in found:
        if b.name in out:
            raise SuiteError(f"two built-in objectives are named {b.name!r}: "
                             f"{out[b.name].path} and {b.path}")
        if not b.path.is_file():
            raise SuiteError(f"built-in objective {b.name!r}: {b.path} does not exist")
        out[b.name] = b
    return out


def _check_suite(suite: Suite, hooks: dict[str, HookSpec], builtins: dict[str, Builtin]) -> None:
    for hook in suite.accepted_hooks:
        if hook not in hooks:
            raise SuiteError(f"suite {suite.name!r} uses hook {hook!r}, which no suite or "
                             f"the engine declares")
    for name in suite.baselines:
        if name not in builtins:
            raise SuiteError(f"suite {suite.name!r}: baseline {name!r} is not a built-in "
                             f"objective (add {name}.py to its baselines/ folder)")
        if not set(suite.accepted_hooks) & defined_hooks(builtins[name].path, hooks):
            raise SuiteError(f"suite {suite.name!r}: baseline {name!r} defines none of "
                             f"{', '.join(suite.accepted_hooks)}")


# --- lookups --------------------------------------------------------------------------


def suite_names() -> list[str]:
    return list(_registry().suites)


def all_suites() -> list[Suite]:
    return list(_registry().suites.values())


def get_suite(name: str) -> Suite:
    suites = _registry().suites
    if name not in suites:
        raise KeyError(f"unknown suite {name!r} (suites: {', '.join(suites)})")
    return suites[name]


def suite_at(name: str, version: str) -> Suite:
    """The registry's suite at a stored version: ``V``, a shortened ``V+eN``, the tuned
    protocol's final ``V+tunedK`` and its trials' ``V+tunedK.tI`` (after ``+eN`` too)."""
    suite = get_suite(name)
    if version == suite.version:
        return suite
    match = re.fullmatch(re.escape(suite.version) + r"(?:\+e(\d+))?(?:\+tuned(\d+)(?:\.t(\d+))?)?",
                         version)
    if match is None or (match[2] is not None and (
            suite.tuning is None or int(match[2]) != suite.tuning.k)):
        raise LookupError(f"suite {name} version {version} is no longer available "
                          f"(current version: {suite.version})")
    if match[1] is not None:
        suite = suite.shortened(int(match[1]))
    if match[2] is not None:
        try:
            suite = suite.tuned() if match[3] is None else suite.trial(int(match[3]))
        except ValueError as exc:  # a trial outside the budget
            raise LookupError(f"suite {name} version {version}: {exc}") from None
    return suite


def package_of(suite: Suite | str) -> str:
    return _registry().packages[suite if isinstance(suite, str) else suite.name]


def hooks() -> MappingProxyType:
    """Every hook an objective may define: name -> :class:`HookSpec`."""
    return _registry().hooks


def builtins() -> MappingProxyType:
    """Every built-in objective: name -> :class:`Builtin`, in display order."""
    return _registry().builtins


def pipeline(suite: Suite) -> Pipeline:
    """The suite's prepare/train/judge implementation (imports torch)."""
    return _pipeline(suite.pipeline)


@cache
def _pipeline(path: str) -> Pipeline:
    from harness.contract.pipeline import Pipeline

    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    instance = cls()
    if not isinstance(instance, Pipeline):
        raise SuiteError(f"{path} is not a harness.contract.pipeline.Pipeline")
    return instance


def pipeline_modules() -> list[str]:
    """The modules of every suite's pipeline (the sandbox's fork server imports them)."""
    return list(dict.fromkeys(s.pipeline.partition(":")[0] for s in all_suites()))


def defined_hooks(path: Path, known: Any = None) -> set[str]:
    """Names of the known hooks a module file defines at top level, read from its AST
    (no import, so listing built-ins stays fast)."""
    known = hooks() if known is None else known
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in known}


def docstring_title(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def import_roots() -> list[tuple[str, str]]:
    """(package, the sys.path entry it imports from) of every registered suite package, so
    that a fresh interpreter (the sandbox's) can import them without this one's path.
    A package made in memory (no file) cannot be imported elsewhere and is left out."""
    out = []
    for package in _registry().packages.values():
        folder = _folder(package)
        if folder is not None:
            out.append((package, str(folder.parents[package.count(".")])))
    return out


def _folder(package: str) -> Path | None:
    path = getattr(importlib.import_module(package), "__file__", None)
    return Path(path).parent if path else None


def readable_paths() -> list[str]:
    """What importing every suite package reads: each package's folder and the
    ``__init__.py`` of the packages above it."""
    paths = []
    for package, root in import_roots() + _shared_roots():
        parts = package.split(".")
        paths.append(str(Path(root, *parts)))
        paths += [str(Path(root, *parts[:i], "__init__.py")) for i in range(1, len(parts))]
    return list(dict.fromkeys(paths))


def _shared_roots() -> list[tuple[str, str]]:
    """(package, its sys.path entry) of the code suites declare they share
    (``Suite.shared_code``); readable in the sandbox, never registered as suites."""
    out = []
    for suite in _registry().suites.values():
        for package in suite.shared_code:
            folder = _folder(package)
            if folder is not None:
                out.append((package, str(folder.parents[package.count(".")])))
    return out


def adopt(roots: list[tuple[str, str]] | list[list[str]]) -> None:
    """Make another process's suite packages importable and registered here (the sandbox's
    fork server and child, whose environment and path are their own)."""
    import sys

    for _, root in roots:
        if root not in sys.path:
            sys.path.append(root)
    add_packages([package for package, _ in roots])
