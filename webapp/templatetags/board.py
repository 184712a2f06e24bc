"""Number formatting, plot figures and code highlighting for the leaderboard templates.

Values are formatted by the metric's own spec (``MetricSpec.to_json()``: unit and
decimals), with the one rule of :func:`harness.contract.suite.format_value`; plots are the figures
of :mod:`harness.report.figures`."""

from __future__ import annotations

import json
import logging

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from harness.contract.suite import format_value, is_number
from harness.report import figures

register = template.Library()
logger = logging.getLogger(__name__)


@register.filter
def metric(value, spec):
    """``value|metric:spec``: a metric value in its unit (73.2 for a percent, 0.034, 1.2e-03)."""
    if not isinstance(spec, dict):
        return "–" if not is_number(value) else str(value)
    return format_value(value, spec.get("unit", "number"), int(spec.get("decimals", 3)))


@register.filter
def improvement(value, spec):
    """``value|improvement:spec``: an improvement with its sign (positive = better), in
    percentage points for percents."""
    if not isinstance(spec, dict):
        return "–" if not is_number(value) else str(value)
    return format_value(value, spec.get("unit", "number"), int(spec.get("decimals", 3)),
                        signed=True)


@register.filter
def unit_suffix(spec, kind="value"):
    """`` (%)`` for a percent value, `` (pp)`` for a percent difference, else nothing."""
    if not isinstance(spec, dict) or spec.get("unit") != "percent":
        return ""
    return " (pp)" if kind == "delta" else " (%)"


@register.filter
def score(value):
    """A normalized score (0 = anchor of chance, 1 = perfect): three decimals."""
    return f"{value:.3f}" if is_number(value) else "–"


@register.filter
def prob(value):
    return f"{value:.2f}" if is_number(value) else "–"


@register.filter
def figure(payload, kind):
    """``payload|figure:kind``: the plotly figure dict of a plot's payload
    (:func:`harness.report.figures.build`), for ``compact_json_script``. A payload the
    figure cannot be built from gives None (logged), which the page shows as a plot that
    could not be drawn rather than failing the whole page."""
    try:
        return figures.build(kind, payload)
    except Exception:
        logger.exception("the %s figure could not be built", kind)
        return None


@register.filter
def describe_figure(fig) -> str:
    """``fig|describe_figure``: the figure in words, for a screen reader
    (:func:`harness.report.describe.describe`)."""
    from harness.report.describe import describe

    return describe(fig)


@register.filter
def compact_json_script(value, element_id):
    """Django's ``json_script`` (``<``, ``>`` and ``&`` written as ``\\u003C``, … so that
    nothing in the JSON can end the script or start markup), written compactly: no spaces
    after ``,`` and ``:`` (a figure is mostly numbers in lists: a tenth of its bytes), and
    escaped with ``str.replace``, which on a figure's tens of kB takes a fiftieth of the
    ``str.translate`` that ``json_script`` uses."""
    text = json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))
    for char, code in (("&", "\\u0026"), ("<", "\\u003C"), (">", "\\u003E")):
        text = text.replace(char, code)
    return format_html('<script id="{}" type="application/json">{}</script>', element_id,
                       mark_safe(text))  # escaped for a script element just above


@register.filter
def get(mapping, key):
    """``mapping|get:key`` for keys that are not identifiers (variant names, seeds)."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def highlight_python(code: str):
    """Server-side syntax highlighting (pygments when installed, else escaped text)."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # pragma: no cover - pygments ships with rich
        return mark_safe(f'<pre class="code" tabindex="0">{escape(code)}</pre>')
    html = highlight(code, PythonLexer(), HtmlFormatter(cssclass="code highlight",
                                                        linenos=False))
    # pygments escapes the source; a block wider than a phone scrolls, so it takes focus
    return mark_safe(html.replace("<pre>", '<pre tabindex="0">', 1))
