"""Number formatting and code highlighting for the leaderboard templates."""

from __future__ import annotations

import math

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@register.filter
def num(value, percent=False):
    """A metric value: percent metrics as 73.2, others with 3 significant digits."""
    if not _finite(value):
        return "–"
    if percent:
        return f"{100 * value:.1f}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


@register.filter
def signed(value, percent=False):
    """A difference with its sign: +1.2 (percentage points) or +0.0123."""
    if not _finite(value):
        return "–"
    text = f"{100 * value:+.1f}" if percent else f"{value:+.3g}"
    return "±0.0" if text in ("+0.0", "-0.0") else text.replace("-", "−")


@register.filter
def score(value):
    """A normalized score (0 = anchor of chance, 1 = perfect): three decimals."""
    return f"{value:.3f}" if _finite(value) else "–"


@register.filter
def prob(value):
    return f"{value:.2f}" if _finite(value) else "–"


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
        return mark_safe(f'<pre class="code">{escape(code)}</pre>')
    html = highlight(code, PythonLexer(), HtmlFormatter(cssclass="code highlight",
                                                        linenos=False))
    return mark_safe(html)  # pygments escapes the source
