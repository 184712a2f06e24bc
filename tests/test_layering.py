"""The layering the docs promise: the engine (harness/) imports nothing from suites/, webapp/
or tasks/ except through the registry's dynamic lookup and the marked entry point
(harness/cli.py); shared code (harness/, webapp/, tasks/) names no suite; webapp/ and
tasks/ find suites only through the registry."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from harness.contract import registry

ROOT = Path(__file__).resolve().parents[1]
# They wire storage in, as their docstrings say.
ENTRY_POINTS = {"harness/cli.py", "harness/api.py", "harness/results.py"}


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions too)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _files("harness"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_no_suite_web_or_task_module(path):
    if str(path.relative_to(ROOT)) in ENTRY_POINTS:
        return
    upward = {m for m in _imports(path)
              if m.split(".")[0] in ("suites", "webapp", "tasks", "django", "celery")}
    assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"


@pytest.mark.parametrize("path", _files("webapp") + _files("tasks"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_web_and_workers_find_suites_through_the_registry(path):
    assert not {m for m in _imports(path) if m.split(".")[0] == "suites"}, \
        f"{path.relative_to(ROOT)} imports a suite package by name"


def test_shared_code_names_no_suite():
    # A suite's name as a string, its package as a module or a path. ("calibration" is
    # also the engine's metrics module and a word of the domain: only a reference to the
    # suite counts.)
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
    out = subprocess.run([str(Path(__import__('sys').executable)), "-c", code], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
