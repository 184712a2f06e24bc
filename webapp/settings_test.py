"""Test settings: the real PostgreSQL that scripts/services.sh starts, unless DATABASE_URL
points elsewhere (storage tests must exercise the production database engine).

Each test process (pytest, or each pytest-xdist worker) keeps its files in a directory of
its own, never the developer's: the embedded database, broker and static files
(``HARNESS_HOME``) and the data root with its sandbox key (``HARNESS_DATA``). It is made
here, before Django reads the settings that point into it; a test's subprocesses inherit it.
tests/plugin.py removes it at the end. Suite fixtures are shared between the workers
(content-addressed, built under a lock: tests/plugin.py)."""

import os
import tempfile


def _own_directory() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if os.environ.get("HARNESS_TEST_WORKER") == worker and os.environ.get("HARNESS_TEST_ROOT"):
        return  # a subprocess of this test process: its files are the parent's
    root = tempfile.mkdtemp(prefix=f"harness-test-{worker}-")
    os.environ.update(HARNESS_TEST_ROOT=root, HARNESS_TEST_WORKER=worker,
                      HARNESS_TEST_OWNER=str(os.getpid()),
                      HARNESS_HOME=os.path.join(root, "home"),
                      HARNESS_DATA=os.path.join(root, "data"))


_own_directory()
os.environ.setdefault("DATABASE_URL", "postgres://harness:harness@127.0.0.1:5432/harness")
# the published constant signs the tests' sessions only (webapp/secret_key.py)
os.environ.setdefault("DJANGO_SECRET_KEY", "local-development-only-not-secret")

from webapp.settings import *  # noqa: E402,F403
