"""Serve plotly.min.js from the installed plotly package as ``vendor/plotly.min.js``.

Pages work offline: plotly.js comes with the Python package, never from a CDN, and
is not copied into the repository.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

NAME = "vendor/plotly.min.js"


def plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != NAME:
            return [] if find_all else None
        found = str(plotly_js())
        return [found] if find_all else found

    def list(self, ignore_patterns):
        storage = FileSystemStorage(location=str(plotly_js().parent))
        storage.prefix = "vendor"  # collectstatic writes vendor/plotly.min.js
        yield "plotly.min.js", storage
