"""The project's pytest plugin: the shared fixtures and hooks of every test, wherever its
file lives (``tests/`` for the engine, the site and the workers; ``suites/<name>/tests/``
for a suite's own). pyproject.toml loads it for every run (``addopts = -p tests.plugin``,
importable through ``pythonpath``), so a suite's tests need no conftest of their own
(docs/testing.md).

What keeps the two pytest-xdist workers apart: each has its own PostgreSQL database
(pytest-django's ``test_harness_gw0``, ``_gw1``), its own files (made in
webapp/settings_test.py), its own Redis database numbers (:func:`redis_db`) and one torch
thread; servers a test starts listen on free ports."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1"; "" when not distributed
REDIS_DATABASES = 16  # redis-server's default

# Suite fixtures (source models, generated pools) are built once per test run, in a
# directory of the run's own: never the user's cache. One directory for every worker and
# CLI subprocess: entries are content-addressed and built under an exclusive lock
# (harness/data/fixtures.py), so a source model two workers need is trained once.
# scripts/test.sh makes it for both of `make test`'s pytest runs.
if "HARNESS_FIXTURES" not in os.environ:
    _FIXTURES = os.environ["HARNESS_FIXTURES"] = tempfile.mkdtemp(prefix="harness-fixtures-")

    def pytest_sessionfinish(session, exitstatus):
        if not WORKER:  # the controller (or a plain run): the workers share it
            shutil.rmtree(_FIXTURES, ignore_errors=True)


def pytest_configure(config):
    if WORKER:  # two workers on two cores: more threads would oversubscribe them
        import torch

        torch.set_num_threads(1)


def pytest_unconfigure(config):
    if os.environ.get("HARNESS_TEST_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["HARNESS_TEST_ROOT"], ignore_errors=True)


def redis_db(n: int) -> int:
    """This worker's number for a test's Redis database ``n`` (0-7): gw0 uses 0-7, gw1
    8-15, so that a test flushing its database never touches the other worker's."""
    assert 0 <= n < 8, n
    index = int(WORKER[2:]) if WORKER else 0
    return (8 * index + n) % REDIS_DATABASES


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


def pytest_addoption(parser):
    parser.addoption("--reproduce", action="store_true",
                     help="also run the full-size reproductions (@pytest.mark.reproduce): "
                          "`make reproduce`")


# The files that take longest (seconds of test time, 2026-12-07: `TEST_REPORTS`), first, by
# their path from the repository root: pytest-xdist hands a worker its next file when it
# runs low, so a long file left for last would keep one core busy while the other idles.
# The order only moves the end of a run; a file missing here runs after these, in pytest's
# order.
LONG_FILES = ("tests/test_bench.py", "suites/unlearning/tests/test_unlearning_suite.py",
              "tests/client/test_submit_cli.py", "tests/client/test_cli.py",
              "tests/workers/test_faults.py", "suites/tta/tests/test_tta_suite.py",
              "tests/web/test_submit.py", "tests/web/test_browser.py",
              "tests/sandbox/test_cli_sandbox.py", "tests/engine/test_fake_suite.py",
              "suites/unlearning/tests/test_unlearning_released.py",
              "tests/engine/test_pinned_results.py", "tests/sandbox/test_cheats.py",
              "tests/web/test_uploads.py", "tests/client/test_tuned.py",
              "tests/web/test_api.py", "tests/web/test_heldout.py",
              "suites/certified/tests/test_certified_suite.py",
              "tests/sandbox/test_hostile_unlearning.py", "tests/client/test_notebook.py",
              "tests/client/test_profile_cli.py", "tests/sandbox/test_hostile_processes.py",
              "tests/sandbox/test_sandbox.py", "tests/test_deploy.py")


def pytest_collection_modifyitems(config, items):
    """The longest files first (scripts/test.sh keeps this order: --no-loadscope-reorder).
    Full-size reproductions of a literature finding run only with --reproduce; each has
    a small version that runs always (docs/testing.md)."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    # stable: files stay whole. A node id starts with the file's path from the rootdir.
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))
    if config.getoption("--reproduce"):
        return
    skip = pytest.mark.skip(reason="full-size reproduction: `make reproduce`")
    for item in items:
        if "reproduce" in item.keywords:
            item.add_marker(skip)
