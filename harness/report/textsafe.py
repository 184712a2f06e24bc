"""Untrusted text made safe to show: control characters become visible escapes.

A sandboxed child's captured stdout/stderr, the error texts and the guard's violation
messages are written by the objective. Printed raw, an ESC sequence can recolour, move
the cursor or retitle the operator's terminal, a carriage return or backspaces can
overwrite what was printed before it (a "killed" line rewritten to read "ok"), and a
Unicode bidi override can make text read differently from what it is. HTML escaping
(Django's autoescape) handles none of these.

:func:`printable` escapes them as ``\\x1b`` / ``\\u202e`` (as Python's ``repr`` writes
them), keeping newlines and tabs, so the text stays readable and shows what was sent.
Use it wherever such text reaches a terminal or a page; keep the raw text in storage
and in JSON, but for what a database refuses to store (:func:`storable`).
"""

from __future__ import annotations

# C0 controls except \t and \n, DEL, and the C1 controls (U+0080–U+009F, which some
# terminals read as 8-bit CSI/OSC introducers).
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
# Bidi embeddings/overrides (LRE, RLE, PDF, LRO, RLO) and isolates (LRI, RLI, FSI, PDI).
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# Lone surrogates (from undecodable bytes or a JSON "\udcff") cannot be encoded for a
# terminal or a database: printing one raises UnicodeEncodeError.
_SURROGATES = range(0xD800, 0xE000)

_ESCAPES = {c: f"\\x{c:02x}" for c in _CONTROLS}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (*_BIDI, *_SURROGATES)})


def printable(text: str | None) -> str:
    """``text`` with control characters, bidi controls and lone surrogates written as
    visible escapes (``"\\x1b[2J"`` → ``"\\\\x1b[2J"``); ``\\n`` and ``\\t`` kept."""
    if not text:
        return ""
    return str(text).translate(_ESCAPES)


# What PostgreSQL refuses in a text column: NUL, and (in UTF-8) lone surrogates.
_UNSTORABLE = {0: "\\x00", **{c: f"\\u{c:04x}" for c in _SURROGATES}}


def storable(text: str | None) -> str:
    """``text`` with the characters a database text column refuses (NUL, lone surrogates)
    written as visible escapes; everything else kept raw. An objective that prints a NUL
    byte or raises with one in its message must not make its own result unstorable."""
    if not text:
        return ""
    return str(text).translate(_UNSTORABLE)


def is_storable(text: str) -> bool:
    """Whether a database text column can hold ``text`` as it is (no NUL, no lone
    surrogate): a value that cannot be stored is in no stored row."""
    return not any(ord(c) in _UNSTORABLE for c in text)


def hidden_characters(text: str) -> list[str]:
    """The control, bidi-control and lone-surrogate characters of ``text`` (newlines and
    tabs included), as ``U+XXXX``: what a name shown on a page must not contain."""
    bad = {*_CONTROLS, *_BIDI, *_SURROGATES, 0x09, 0x0A}
    return list(dict.fromkeys(f"U+{ord(c):04X}" for c in text if ord(c) in bad))
