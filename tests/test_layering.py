"""The layering docs/architecture.md draws, checked by AST over every module (lazy imports
inside functions count too), with no list of exceptions: a module's layer is where it
lives.

    engine   harness/<package>/ but storage/  the engine only
    storage  harness/storage/                 + the engine, Django
    client   harness/*.py (api, cli, …)       + storage, the site's tables and plots
    web      webapp/                          + storage (operator commands: + client, tasks)
    workers  tasks/                           + storage, web
    suites   suites/<name>/                   the engine and suites only
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import registry

ROOT = Path(__file__).resolve().parents[1]
SERVER = {"django", "celery", "kombu", "redis", "psycopg", "gunicorn", "whitenoise",
          "django_celery_results"}
ENGINE_PACKAGES = sorted(p.parent.name for p in (ROOT / "harness").glob("*/__init__.py")
                         if p.parent.name != "storage")
ALLOWED = {
    "engine": {"engine"},
    "storage": {"engine", "storage", "server"},
    "client": {"engine", "storage", "client", "leaderboard", "server"},
    "web": {"engine", "storage", "web", "leaderboard", "server"},
    "operator": {"engine", "storage", "web", "leaderboard", "server", "client", "tasks"},
    "tasks": {"engine", "storage", "web", "leaderboard", "server", "tasks"},
    "suites": {"engine", "suites"},
}


def layer_of_module(name: str) -> str | None:
    """The layer a dotted module name belongs to (None: the standard library or a
    third-party package other than the server's)."""
    parts = name.split(".")
    if parts[0] == "harness":
        if len(parts) == 1 or parts[1] in ENGINE_PACKAGES:
            return "engine"
        return "storage" if parts[1] == "storage" else "client"
    if parts[0] == "webapp":
        return "leaderboard" if parts[1:2] == ["leaderboard"] else "web"
    if parts[0] in ("tasks", "suites", "tests"):
        return parts[0]
    return "server" if parts[0] in SERVER else None


def layer_of_file(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "webapp":
        return "operator" if rel.parts[1:3] == ("management", "commands") else "web"
    if rel.parts[0] == "harness" and len(rel.parts) == 2 and rel.name != "__init__.py":
        return "client"
    return layer_of_module(".".join(rel.with_suffix("").parts))


def imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth, with relative imports resolved; ``from
    a import b`` counts as ``a.b`` (``from harness import api`` is the client's api)."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base]) if base else ".".join(up)
            found |= {f"{base}.{a.name}" if a.name != "*" else base for a in node.names}
    return found


def _files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py")
                  if "tests" not in p.relative_to(ROOT).parts[1:])


@pytest.mark.parametrize("path", _files("harness", "webapp", "tasks", "suites"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_imports_only_the_layers_below_it(path):
    layer = layer_of_file(path)
    wrong = sorted(m for m in imports(path)
                   if (target := layer_of_module(m)) and target not in ALLOWED[layer])
    assert not wrong, f"{path.relative_to(ROOT)} ({layer}) imports {wrong}"


def test_the_layers_are_told_apart_by_place():
    # The rule the test stands on, on known modules of each layer.
    assert {layer_of_file(ROOT / p) for p in ("harness/contract/suite.py",
                                               "harness/sandbox/child.py",
                                               "harness/runner/group.py")} == {"engine"}
    assert layer_of_file(ROOT / "harness/storage/store.py") == "storage"
    assert layer_of_file(ROOT / "harness/api.py") == "client"
    assert layer_of_file(ROOT / "webapp/views/json_api.py") == "web"
    assert layer_of_module("webapp.leaderboard.boards") == "leaderboard"
    assert layer_of_module("numpy") is None and layer_of_module("psycopg") == "server"
    assert imports(ROOT / "harness/storage/apps.py") == {"django.apps.AppConfig"}


def test_the_engine_imports_with_the_server_packages_blocked():
    """Every engine module imports in a process where Django, Celery, redis and psycopg
    (and the other server packages) cannot be imported at all."""
    code = f"""
import importlib, pkgutil, sys
BLOCKED = {sorted(SERVER)!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: the engine must not need it")
sys.meta_path.insert(0, Block())
import harness
names = []
for package in {ENGINE_PACKAGES!r}:
    module = importlib.import_module("harness." + package)
    names.append(module.__name__)
    for info in pkgutil.walk_packages(module.__path__, module.__name__ + "."):
        importlib.import_module(info.name)
        names.append(info.name)
print(len(names))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) >= 60  # every module was reached, not an early empty walk


def test_a_plain_install_runs_the_client_and_its_store_without_the_server_packages(tmp_path):
    """The CLI and the embedded SQLite store need Django only: with Celery, redis,
    psycopg, gunicorn and whitenoise unimportable, ``harness ls`` lists the suites and the
    store migrates and answers."""
    code = f"""
import os, sys
BLOCKED = {sorted(SERVER - {"django"})!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: a plain install does not have it")
sys.meta_path.insert(0, Block())
from harness import api, cli
assert cli.main(["ls"]) == 0
api.setup()
from harness.storage.models import Cell
print("cells", Cell.objects.count())
"""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**env, "HARNESS_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "noisy-labels" in out.stdout and out.stdout.rstrip().endswith("cells 0")
    assert (tmp_path / "harness.sqlite3").is_file()


def test_no_module_is_over_500_lines_without_a_reason_at_its_top():
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    long = [f for f in tracked if "/migrations/" not in f and (ROOT / f).is_file()
            and len((ROOT / f).read_text().splitlines()) > 500]
    unexplained = [f for f in long
                   if not (ROOT / f).read_text().startswith('"""Over 500 lines on purpose: ')]
    assert not unexplained, f"over 500 lines, no reason at the top: {unexplained}"


def test_shared_code_names_no_suite():
    # A suite's name as a string, its package as a module or a path. ("calibration" is
    # also a word of the domain: only a reference to the suite counts.)
    words = set()
    for suite in registry.all_suites():
        package = registry.package_of(suite)
        words |= {f'"{suite.name}"', f"'{suite.name}'", package, package.replace(".", "/")}
    args = ["git", "grep", "-n", "-i", "-F"]
    for w in sorted(words):
        args += ["-e", w]
    found = subprocess.run([*args, "--", "harness", "webapp", "tasks"], cwd=ROOT,
                           capture_output=True, text=True)
    assert found.stdout == "", f"suite names in shared code:\n{found.stdout}"


def test_the_registry_line_is_the_only_place_suites_are_listed():
    text = (ROOT / "suites" / "__init__.py").read_text()
    for suite in registry.all_suites():
        assert f'"{registry.package_of(suite)}"' in text
    assert registry.PROJECT_SUITES == "suites:PACKAGES"


def test_listing_suites_and_builtins_imports_no_torch():
    code = ("import sys; from harness.contract import registry; registry.all_suites(); "
            "registry.builtins(); registry.hooks(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
