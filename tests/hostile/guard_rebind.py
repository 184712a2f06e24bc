"""Switches off the guard's path checks without touching its (closure-bound) state, by
rebinding one thing per case (``__HOSTILE_PARAM__``) that the check used to call, or still
calls, at call time: sandbox_guard._real, os.fsdecode, posixpath.realpath (now captured
at install), builtins.any and builtins.isinstance (looked up by the hook at each event),
os.fspath (which the captured os.fsdecode looks up: a TypeError makes the check return
without refusing), posixpath._joinrealpath (which the captured realpath looks up), and
builtins.len made to raise (refuse() calls it before its try/finally, so the refusal
becomes an ordinary exception and os._exit never runs); then reads /etc/passwd
(swallowing the error), puts it back and trains.

Expected: nothing is read (Landlock refuses it, EACCES, or the hook aborts it); the read
is reported as a violation naming /etc/passwd and ends the child (``killed``/``violation``),
which holds for the captured helpers and not yet for builtins and the helpers' internals.
"""

import builtins
import os
import posixpath

import torch.nn.functional as F

from harness.sandbox import guard as sandbox_guard

WORKDIR = os.getcwd()


def _not_a_path(*args, **kwargs):
    raise TypeError("not a path")


OWNER, NAME, FAKE = {
    "_real": (sandbox_guard, "_real", lambda path: WORKDIR),
    "fsdecode": (os, "fsdecode", _not_a_path),
    "realpath": (posixpath, "realpath", lambda path, **kw: WORKDIR),
    "any": (builtins, "any", lambda iterable: True),
    "isinstance": (builtins, "isinstance", lambda obj, kind: True),
    "fspath": (os, "fspath", _not_a_path),
    "joinrealpath": (posixpath, "_joinrealpath", lambda *args: (WORKDIR, True)),
    "len": (builtins, "len", _not_a_path),
}["__HOSTILE_PARAM__"]
saved = getattr(OWNER, NAME)
setattr(OWNER, NAME, FAKE)
try:
    with open("/etc/passwd") as f:
        outcome = f"read /etc/passwd: {f.read(20)!r}"
except Exception as exc:  # noqa: BLE001 - whatever the guard or the kernel raised
    outcome = f"/etc/passwd: {type(exc).__name__}: {exc}"
finally:
    setattr(OWNER, NAME, saved)
print(f"{OWNER.__name__}.{NAME}: {outcome}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
