"""Test settings: the real PostgreSQL that scripts/services.sh starts, unless DATABASE_URL
points elsewhere (storage tests must exercise the production database engine)."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://harness:harness@127.0.0.1:5432/harness")

from webapp.settings import *  # noqa: E402,F403
