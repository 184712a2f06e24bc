"""Where the harness keeps its files on this machine (the embedded database, captured
notebook objectives, static files): ``$HARNESS_HOME``, else
``$XDG_DATA_HOME/objective-harness`` (``~/.local/share/objective-harness``)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    home = os.environ.get("HARNESS_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "objective-harness"
