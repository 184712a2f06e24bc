"""A figure in words: what a screen reader reads instead of a plot.

Every plot on the pages is drawn from a figure dict (:mod:`harness.report.figures`); this
turns the same dict into a few sentences: the axes, then each series shown with its values
(the first points of each, the first series of many), so that nothing a sighted reader
gets from the plot depends on seeing it. Bands and other decorations (traces without a
legend name, or with hover turned off) are left out: their numbers are the intervals the
tables beside every plot give.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

SERIES = 12  # series described, then "and N more"
POINTS = 8  # values per series, then "… (N in all)"


def describe(figure: Mapping[str, Any] | None) -> str:
    """Sentences describing ``figure`` (a plotly figure dict); '' for none."""
    if not figure:
        return ""
    layout = figure.get("layout", {})
    axes = [f"{name}: {title}" for name, title in (("across", _title(layout, "xaxis")),
                                                    ("up", _title(layout, "yaxis")))
            if title]
    panels = sum(1 for k in layout if re.fullmatch(r"xaxis\d*", k)) > 1
    series = [s for s in (_series(t, layout if panels else None)
                          for t in figure.get("data", [])) if s]
    parts = [f"Axes — {'; '.join(axes)}." if axes else ""]
    if not series:
        parts.append("No series to show.")
    else:
        shown = series[:SERIES]
        more = len(series) - len(shown)
        parts.append(f"{len(series)} series: " + "; ".join(shown)
                     + (f"; and {more} more (in the table)" if more else "") + ".")
    for note in layout.get("annotations", []) or []:
        text = _plain(note.get("text", ""))
        if text:
            parts.append(text)
    return " ".join(p for p in parts if p)


def _series(trace: Mapping[str, Any], panels: Mapping[str, Any] | None) -> str:
    """One series in words; ``panels``: the layout, when the figure has several panels
    (a series is then named with its panel's axis title)."""
    if trace.get("hoverinfo") == "skip" or trace.get("visible") == "legendonly":
        return ""
    name = _plain(str(trace.get("name") or ""))
    if not name or trace.get("fill"):
        return ""
    if panels is not None:
        axis = str(trace.get("xaxis") or "x").replace("x", "xaxis", 1)
        panel = _title(panels, axis)
        name += f" ({panel})" if panel else ""
    x, y = trace.get("x"), trace.get("y")
    horizontal = trace.get("orientation") == "h" or (_categorical(y) and not _categorical(x))
    values, where = (x, y) if horizontal else (y, x)
    if not isinstance(values, Sequence) or not values:
        return ""
    where = where if isinstance(where, Sequence) and len(where) == len(values) else None
    points = [f"{_number(w)}: {_number(v)}" if where is not None else _number(v)
              for w, v in zip(where or [None] * len(values), values, strict=True)
              if v is not None]
    if not points:
        return ""
    text = ", ".join(points[:POINTS])
    if len(points) > POINTS:
        text += f", … ({len(points)} in all)"
    return f"{name}: {text}"


def _categorical(values: Any) -> bool:
    return isinstance(values, Sequence) and any(isinstance(v, str) for v in values)


def _title(layout: Mapping[str, Any], axis: str) -> str:
    title = (layout.get(axis) or {}).get("title")
    if isinstance(title, Mapping):
        title = title.get("text")
    return _plain(str(title or ""))


def _number(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return _plain(str(v))
    return f"{v:.3g}"


def _plain(text: str) -> str:
    """Figure text is HTML-escaped for plotly (and may hold <br>): plain words for a reader."""
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).strip()
