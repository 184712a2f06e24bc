"""``{{ text|printable }}``: untrusted text (a cell's captured output, an error, a
validator message) with control characters shown as escapes.

Autoescaping makes such text safe as HTML; this makes it readable as what was sent: an
ESC sequence, a carriage return or a bidi override (which reorders what follows it on
the page) is written out as ``\\x1b``, ``\\x0d``, ``\\u202e`` (:mod:`harness.report.textsafe`).
The result is not marked safe: autoescaping still applies. JSON keeps the raw text;
``webapp/status.js`` escapes it the same way when it updates the page.
"""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from harness.report.textsafe import printable as _printable

register = template.Library()
_CODE = re.compile(r"`([^`]+)`")


@register.filter(is_safe=True)  # adds no HTML metacharacter: safe input stays safe
def printable(value) -> str:
    return _printable("" if value is None else str(value))


@register.filter(needs_autoescape=True)
def inline_code(value, autoescape: bool = True) -> SafeString:
    """Our own prose (the API's descriptions) with its Markdown ``code`` spans as <code>:
    escaped first, so only the spans become markup."""
    text = conditional_escape(value) if autoescape else str(value)
    return mark_safe(_CODE.sub(r"<code>\1</code>", str(text)))  # noqa: S308 -- escaped above
