"""Shared fixtures (the PostgreSQL default is set in the root conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a `harness` subprocess on the embedded default (SQLite in tmp)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["HARNESS_HOME"] = str(tmp_path / "home")
    env["HARNESS_THREADS"] = "2"
    return env
