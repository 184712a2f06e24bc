"""A function defined in a notebook, written out as an objective file.

The harness versions an objective by its source text and trains it in worker processes
(or the sandbox) that load it from a file, so a notebook function must become a file:
its source (``inspect.getsource``; IPython keeps every cell's text for it), preceded by
what it uses from the notebook's globals — modules as imports, functions from installed
packages as ``from … import``, other notebook functions captured the same way, and
plain constants as assignments. Anything else (a closure's cells, a tensor, an open
file) has no faithful text, and is refused with a message saying what to do instead.
The same function text always gives the same file, hence the same stored version.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import inspect
import os
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.objectives.loading import ObjectiveError
from harness.storage.home import data_dir

CONSTANTS = (bool, int, float, complex, str, bytes, type(None))


@dataclass(frozen=True)
class Captured:
    name: str  # the objective's name: the function's
    source: str  # the module text
    path: Path  # where it was written


def capture(fn: Callable, *, hook: str | None = None, name: str | None = None,
            directory: Path | None = None) -> Captured:
    """Write ``fn`` (and what it uses) as an objective file and return it.

    ``hook``: the hook ``fn`` implements, when its own name is not one (the file then
    binds the hook's name to it). ``directory``: where captured files go (default
    ``$HARNESS_HOME/captured``); the file is ``<directory>/<hash>/<name>.py``, so one
    text is one file. Raises :class:`ObjectiveError` for what cannot be captured."""
    name = name or getattr(fn, "__name__", "")
    blocks, imports = _capture(fn, seen=set())
    alias = f"\n\n{hook} = {fn.__name__}\n" if hook and hook != fn.__name__ else ""
    doc = inspect.getdoc(fn) or f"{name}, captured from a notebook."
    header = '"""' + doc.splitlines()[0].replace('"""', "'''").replace("\\", "\\\\") + '"""\n'
    source = (header + ("\n" + "\n".join(dict.fromkeys(imports)) + "\n" if imports else "")
              + "\n\n" + "\n\n\n".join(blocks) + "\n" + alias)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    root = directory or data_dir() / "captured"
    path = root / digest / f"{name}.py"
    if not (path.is_file() and path.read_text() == source):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        os.replace(tmp, path)  # a concurrent capture of the same text writes the same bytes
    return Captured(name, source, path)


def _capture(fn: Callable, seen: set[int]) -> tuple[list[str], list[str]]:
    """Source blocks (dependencies first) and import lines for ``fn``."""
    label = getattr(fn, "__name__", repr(fn))
    if not isinstance(fn, types.FunctionType):
        raise ObjectiveError("capture", f"{label!s} is not a Python function (a "
                             f"{type(fn).__name__}): pass a function defined with def, a "
                             f".py file, a built-in name or a module")
    if fn.__name__ == "<lambda>":
        raise ObjectiveError("capture", "a lambda cannot be captured (its source is part of "
                             "a larger expression): define the objective with def")
    if fn.__closure__:
        names = ", ".join(fn.__code__.co_freevars)
        raise ObjectiveError("capture", f"{fn.__name__} is a closure over {names} of an "
                             f"enclosing function, whose values are not in its source: "
                             f"define it at the top level of a cell and make {names} "
                             f"keyword-only hyperparameters (or constants)")
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise ObjectiveError("capture", f"the source of {fn.__name__} is not available "
                             f"({exc}): define it in a notebook cell or a .py file") from None
    tree = ast.parse(text)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name != fn.__name__:
        raise ObjectiveError("capture", f"the source of {fn.__name__} does not define it "
                             f"with def {fn.__name__}(...): define it with def")
    if node.decorator_list:
        raise ObjectiveError("capture", f"{fn.__name__} is decorated: a decorator changes "
                             f"the function its source shows; remove it")
    seen.add(id(fn))
    blocks: list[str] = []
    imports: list[str] = []
    for name in sorted(_free_names(node)):
        if name not in fn.__globals__:
            continue  # a builtin, or a name the function would fail on anyway
        value = fn.__globals__[name]
        if isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
            if id(value) not in seen:  # a helper beside it: its text goes in the file too
                more, more_imports = _capture(value, seen)
                blocks += more
                imports += more_imports
        elif (line := _import_line(name, value)) is not None:
            imports.append(line)
        elif _is_constant(value):
            blocks.append(f"{name} = {value!r}")
        else:
            raise ObjectiveError("capture", f"{fn.__name__} uses {name}, a "
                                 f"{type(value).__name__} from the notebook that cannot be "
                                 f"written into a file: create it inside the function, or make "
                                 f"it a keyword-only hyperparameter or a plain constant")
    blocks.append(text.rstrip())
    return blocks, imports


def _free_names(node: ast.AST) -> set[str]:
    """Names the function reads that it does not bind itself (an over-approximation is
    harmless: each is looked up in the globals, and builtins are left alone)."""
    loaded, bound = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not node:
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    return {x for x in loaded - bound if not hasattr(builtins, x)}


def _import_line(name: str, value: object) -> str | None:
    """An import statement that binds ``name`` to ``value`` again, if there is one."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if module == "__main__":
            return None
        return f"import {module}" if module == name else f"import {module} as {name}"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        found: object = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    if found is not value or "." in qualname:
        return None
    return (f"from {module} import {qualname}" if qualname == name
            else f"from {module} import {qualname} as {name}")


def _is_constant(value: object) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_is_constant(v) for v in value)
    if isinstance(value, float) and value != value:  # nan has no literal
        return False
    return isinstance(value, CONSTANTS) and (
        not isinstance(value, float) or abs(value) != float("inf"))
