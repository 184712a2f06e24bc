"""The shared fixtures and hooks are in tests/plugin.py, which pyproject.toml loads for
every test, in tests/ and in suites/<name>/tests/ alike (docs/testing.md). Its helpers are
importable from here too, as tests have always imported them."""

from tests.plugin import REDIS_DATABASES, WORKER, cli_environment, redis_db

__all__ = ["REDIS_DATABASES", "WORKER", "cli_environment", "redis_db"]
