"""Keyed draws: every random stream of a cell derived from a secret key, or from the seed.

A cell's randomness (its split, noise draw, data order, initialisations, the reference
model the post-hoc track calibrates, corruption draws, stream orders, source models) comes
from public seeds by default, so anyone reproduces any cell. A public draw is also a
public answer key: a submitted loss that knows which samples a batch holds, or what the
reference model outputs on each test row, can look the labels up instead of learning. A
server that ranks strangers' objectives therefore sets a key (``$HARNESS_DRAWS_KEY``, at
least 16 characters, or ``$HARNESS_DRAWS_KEY_FILE``): every stream is then an HMAC of the
key, the same for every objective (comparisons stay paired) and unknown to all of them.
``harness run … --draws-key FILE`` runs under a given key exactly as such a server does.

The key never reaches a sandboxed process (its environment is a fixed list:
``harness.sandbox.launch.environment``); only what the draws produced is handed over.
Keyed cells carry the key's fingerprint (a one-way hash) in their variant hash and their
environment, so results drawn under different keys are never mixed.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from pathlib import Path

KEY_ENV = "HARNESS_DRAWS_KEY"
KEY_FILE_ENV = "HARNESS_DRAWS_KEY_FILE"
MIN_KEY_CHARS = 16
PUBLIC = "public"


class DrawsKeyError(ValueError):
    """A draws key that cannot be used (too short, unreadable)."""


def key() -> bytes | None:
    """The draws key of this process, or None for public draws."""
    return _key(os.environ.get(KEY_ENV, ""), os.environ.get(KEY_FILE_ENV, ""))


@functools.lru_cache(maxsize=4)  # every stream asks: the file is read once
def _key(text: str, path: str) -> bytes | None:
    if not text and path:
        text = read_key_file(path)
    if not text:
        return None
    if len(text) < MIN_KEY_CHARS:
        raise DrawsKeyError(f"the draws key must be at least {MIN_KEY_CHARS} characters "
                            f"(it is all that stands between a submission and the draws)")
    return text.encode()


def read_key_file(path: str | Path) -> str:
    """A key file's text (surrounding whitespace dropped), with a clear error."""
    try:
        text = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise DrawsKeyError(f"cannot read the draws key file {path}: {exc}") from exc
    if len(text) < MIN_KEY_CHARS:
        raise DrawsKeyError(f"the draws key in {path} must be at least {MIN_KEY_CHARS} "
                        f"characters; it has {len(text)}")
    return text


def use_key(text: str) -> str:
    """Draw from the key ``text`` (:func:`read_key_file`'s) in this process and the workers
    it starts; returns the key's fingerprint."""
    os.environ[KEY_ENV] = text
    os.environ.pop(KEY_FILE_ENV, None)
    return fingerprint()


def keyed() -> bool:
    return key() is not None


def fingerprint() -> str:
    """Names the key (16 hex digits of a one-way hash), ``"public"`` without one."""
    k = key()
    if k is None:
        return PUBLIC
    return hmac.new(k, b"fingerprint", hashlib.sha256).hexdigest()[:16]


def derive(*words: str | int, bits: int = 63) -> int:
    """An integer of ``bits`` bits for ``words`` under the key (HMAC-SHA256): knowing any
    number of draws tells nothing of another or of the key. Only called when keyed."""
    k = key()
    if k is None:
        raise RuntimeError("derive() needs a draws key")
    digest = hmac.new(k, json.dumps(list(words)).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << bits) - 1)


def seed(value: int, purpose: str, bits: int = 32) -> int:
    """``value`` as a generator's seed for ``purpose``: itself with public draws (every
    public result stays what it was), a keyed ``bits``-bit integer otherwise. For the
    streams seeded directly (``default_rng([seed, i])``, ``RandomState(seed + i)``) rather
    than through :func:`harness.contract.seeding.stream_seed`."""
    if not keyed():
        return int(value)
    return derive("seed", purpose, int(value), bits=bits)
