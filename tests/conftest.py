"""Shared fixtures (storage tests use the PostgreSQL of webapp/settings_test.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Suite fixtures (source models, generated pools) are built once per test session, in a
# directory of the session's own: never the user's cache, shared by the CLI subprocesses.
if "HARNESS_FIXTURES" not in os.environ:
    _FIXTURES = os.environ["HARNESS_FIXTURES"] = tempfile.mkdtemp(prefix="harness-fixtures-")

    def pytest_sessionfinish(session, exitstatus):
        shutil.rmtree(_FIXTURES, ignore_errors=True)


def cli_environment(home: Path) -> dict[str, str]:
    """Environment for a `harness` subprocess on the embedded default (SQLite under ``home``).

    pytest-django exports DJANGO_SETTINGS_MODULE=webapp.settings_test (PostgreSQL) into
    os.environ; a CLI subprocess must not inherit it, nor DATABASE_URL.
    """
    dropped = ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["HARNESS_HOME"] = str(home)
    env.pop("HARNESS_THREADS", None)  # one torch thread per worker process, as by default
    return env


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    return cli_environment(tmp_path / "home")
