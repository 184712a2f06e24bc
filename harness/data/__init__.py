"""Datasets: the embedded ones (bundled or generated, always available) and opt-in real
loaders (:mod:`harness.data.real`), which read files from the data root and download only
when asked."""

from __future__ import annotations

import os
from pathlib import Path


def data_root(given: str | None = None) -> str:
    """Where real datasets live: ``given``, else ``$HARNESS_DATA``, else ~/.cache/harness."""
    return given or os.environ.get("HARNESS_DATA", str(Path.home() / ".cache" / "harness"))
