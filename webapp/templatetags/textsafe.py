"""``{{ text|printable }}``: untrusted text (a cell's captured output, an error, a
validator message) with control characters shown as escapes.

Autoescaping makes such text safe as HTML; this makes it readable as what was sent: an
ESC sequence, a carriage return or a bidi override (which reorders what follows it on
the page) is written out as ``\\x1b``, ``\\x0d``, ``\\u202e`` (:mod:`harness.report.textsafe`).
The result is not marked safe: autoescaping still applies. JSON keeps the raw text;
``webapp/status.js`` escapes it the same way when it updates the page.
"""

from __future__ import annotations

from django import template

from harness.report.textsafe import printable as _printable

register = template.Library()


@register.filter(is_safe=True)  # adds no HTML metacharacter: safe input stays safe
def printable(value) -> str:
    return _printable("" if value is None else str(value))
