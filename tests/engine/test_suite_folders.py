"""A suite is its folder plus one registry line, its tests included: `make test` finds the
tests in ``suites/<name>/tests/`` through pyproject.toml's testpaths, and tests/plugin.py
gives them the shared fixtures, so adding a suite's tests changes no file outside its
folder (docs/testing.md)."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from harness.contract import registry

ROOT = Path(__file__).resolve().parents[2]
PYTEST = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def _folder(package: str) -> Path:
    return Path(importlib.import_module(package).__file__).parent


def _assert_every_registered_suite_has_collected_tests():
    collected = {p.resolve() for pattern in PYTEST["testpaths"] for p in ROOT.glob(pattern)}
    for package in registry.packages():
        suite = importlib.import_module(package).SUITE
        # its own folder's tests, or those of the code it shares with another suite
        # (both unlearning suites are tested in suites/unlearning/tests)
        homes = [_folder(p) / "tests" for p in (package, *suite.shared_code)]
        homes = [h for h in homes if any(h.glob("test_*.py"))]
        assert homes, f"{package}: no tests/ folder with a test_*.py file"
        for home in homes:
            assert home.resolve() in collected, f"{home} is not in pyproject's testpaths"
            assert (home / "__init__.py").is_file(), f"{home}: no __init__.py"


TINY = """\"\"\"A new suite: its declaration, its tests beside it.\"\"\"

from harness.contract.suite import Anchors, MetricSpec, Suite, Variant

SUITE = Suite(name="tiny", version="1", description="A new suite.",
              hooks=("classification_loss",), headline="err",
              metrics=(MetricSpec("err", "error", better="lower", decimals=3),),
              anchors={"err": Anchors(1.0, 0.0)}, variants=(Variant("a", {}, ""),),
              pipeline="suites.tiny.pipeline:Tiny", baselines=("ce",))
"""
TEST_X = """from harness.contract import registry


def test_x(cli_env):
    assert "tiny" in registry.suite_names() and cli_env["HARNESS_HOME"]
"""


def test_a_suites_tests_are_in_its_folder_and_make_test_collects_them(tmp_path):
    _assert_every_registered_suite_has_collected_tests()

    # The project as pytest sees it, with no test of its own: its pytest configuration,
    # the shared plugin and the registry, copied as they are; plus a new suite's folder
    # and its one registry line.
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests").mkdir()
    for name in ("__init__.py", "conftest.py", "plugin.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests")
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "__init__.py").write_text(
        (ROOT / "suites" / "__init__.py").read_text()
        + '\nPACKAGES = (*PACKAGES, "suites.tiny")\n')
    tests = tmp_path / "suites" / "tiny" / "tests"
    tests.mkdir(parents=True)
    (tests.parent / "__init__.py").write_text(TINY)
    (tests / "__init__.py").write_text("")
    (tests / "test_x.py").write_text(TEST_X)
    # The child is a run of its own, not a part of this test's worker or run. The real
    # suites still import (the editable install finds suites.<name> in the repository).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HARNESS_TEST_"))}
    # scripts/test.sh's parallel run (--collect-only turns pytest-xdist off)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-n", "2",
                          "--dist", "loadfile", "--no-loadscope-reorder", "-m", "not serial"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert [line for line in out.stdout.splitlines() if "::" in line] == [
        "suites/tiny/tests/test_x.py::test_x"]
