"""Switches off the guard's path checks without touching its (closure-bound) state: the
hook still calls module globals and builtins at call time. For each of four of them -
sandbox_guard._real, os.fsdecode, posixpath.realpath, builtins.any - it replaces it, reads
a different file outside the sandbox (swallowing the error), and puts it back; trains.

Expected: Landlock refuses every read (EACCES), and each attempt is reported as a
violation naming the file: ``killed``/``violation``.
"""

import builtins
import os
import posixpath

import torch.nn.functional as F

from harness import sandbox_guard

WORKDIR = os.getcwd()


def _not_a_path(*args, **kwargs):
    raise TypeError("not a path")


REBINDS = [
    ("/etc/passwd", sandbox_guard, "_real", lambda path: WORKDIR),
    ("/etc/group", os, "fsdecode", _not_a_path),
    ("/etc/hostname", posixpath, "realpath", lambda path, **kw: WORKDIR),
    ("/etc/hosts", builtins, "any", lambda iterable: True),
]
for path, owner, name, fake in REBINDS:
    saved = getattr(owner, name)
    setattr(owner, name, fake)
    try:
        with open(path) as f:
            print(f"{owner.__name__}.{name}: read {path}: {f.read(20)!r}")
    except OSError as exc:
        print(f"{owner.__name__}.{name}: {path}: {type(exc).__name__}: {exc}")
    finally:
        setattr(owner, name, saved)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
