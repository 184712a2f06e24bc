"""Switches off the guard's path checks without touching its (closure-bound) state, by
rebinding one thing per case (``__HOSTILE_PARAM__``) that the check once called at call
time: sandbox_guard._real, os.fsdecode, posixpath.realpath, builtins.any,
builtins.isinstance, os.fspath, posixpath._joinrealpath, and builtins.len made to raise
(refuse() once called it before its try/finally, so the refusal became an ordinary
exception and os._exit never ran); then reads /etc/passwd (swallowing the error), puts
it back and trains. The guard now calls none of them when it checks an event: the
builtins it uses (any, isinstance, len, ...) are captured when it is installed, and it
takes a path apart with str, bytes and posix alone (harness/sandbox/guard.py).

Expected: the rebinding changes nothing, in every case: nothing is read, and the read is
refused as a violation naming /etc/passwd that ends the child (``killed``/``violation``).
Were a rebinding to get past the guard, Landlock would still refuse the read (EACCES).
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
