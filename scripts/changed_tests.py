"""The test files a change can affect: the inner loop before the full `make test`.

    python scripts/changed_tests.py [BASE]      # prints test files, one per line

A change is every file that differs from ``BASE`` (default ``HEAD``: what is not yet
committed; ``main`` for a branch's commits too), untracked files included. A test file is
selected when it changed, when it imports a changed module directly or through other
project modules (the import graph read from the source with ``ast``, imports inside
functions included; the registry counts as importing every suite and built-in, a test
that makes requests as importing the URL configuration), or when its text names a changed
file that is not a module (a bench script, ``entrypoint.sh``, a fixture under
``tests/data``). A changed non-Python file inside a package (a template, a static file)
counts as a change of that package. A change outside the packages (pyproject.toml, the
Makefile, scripts/) or to the shared test plugin (tests/plugin.py, a conftest.py) can affect
any test: then every test file is printed. Test files are those pyproject.toml's testpaths
name: tests/ and every suite's tests/ folder.

It reads imports, not behaviour: a test that reaches a module only through a subprocess
or a registry string (``"module:function"``) is found only if it imports it too. The full
run catches the rest.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "suites", "webapp", "tasks", "tests", "bench")
PLUGIN = ROOT / "tests" / "plugin.py"  # pyproject.toml loads it for every test


def test_files() -> list[Path]:
    """Every test file of pyproject.toml's testpaths (``tests``, ``suites/*/tests``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["pytest"]["ini_options"]["testpaths"]
    return sorted({p for pattern in patterns for folder in ROOT.glob(pattern)
                   for p in folder.rglob("test_*.py")})


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as dotted names (``from a import b`` gives both)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def changed_files(base: str) -> set[Path]:
    def git(*args: str) -> list[str]:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.split()

    names = git("diff", "--name-only", base) + git("ls-files", "--others", "--exclude-standard")
    return {ROOT / n for n in names}


def affected_tests(changed: set[Path]) -> list[Path]:
    sources = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_of(p): p for p in sources}
    tests = test_files()
    outside = [p for p in changed if p.parts[len(ROOT.parts)] not in PACKAGES
               or p.name == "conftest.py" or p == PLUGIN]
    if outside:
        return tests
    changed_modules = set()
    for p in changed:
        if p.suffix == ".py":
            changed_modules.add(module_of(p))
        else:  # data inside a package: the package changed
            folder = p.parent
            while folder != ROOT and not (folder / "__init__.py").exists():
                folder = folder.parent
            if folder != ROOT:
                changed_modules.add(module_of(folder / "__init__.py"))
    graph = {name: {m for m in imports(path) if m in modules} for name, path in modules.items()}
    # the registry imports the suites and the built-in objectives by name, at run time
    # (a suite's code, not its tests)
    graph["harness.contract.registry"] |= {m for m in modules if m.startswith(
        ("suites.", "harness.objectives.builtin.")) and m.split(".")[2:3] != ["tests"]}
    # Django imports the URL configuration (and with it the views) for a test's requests
    for t in tests:
        if any(word in t.read_text() for word in ("client", "live_server", "django_db")):
            graph[module_of(t)].add("webapp.urls")
    # a submodule's import runs its packages' __init__ first
    for name in modules:
        parts = name.split(".")
        graph[name] |= {".".join(parts[:i]) for i in range(1, len(parts))} & modules.keys()
    importers: dict[str, set[str]] = {name: set() for name in modules}
    for name, deps in graph.items():
        for dep in deps:
            importers[dep].add(name)
    affected, todo = set(), [m for m in changed_modules if m in modules]
    while todo:  # everything that imports a changed module, directly or not
        name = todo.pop()
        if name not in affected:
            affected.add(name)
            todo.extend(importers[name])

    names = {p.name for p in changed if p.suffix != ".py" or "bench" in p.parts}
    return [t for t in tests
            if t in changed or module_of(t) in affected
            or any(n in t.read_text() for n in names)]


def main(argv: list[str]) -> int:
    base = argv[0] if argv else "HEAD"
    for path in affected_tests(changed_files(base)):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
