"""Loads native code of its own without ctypes: writes the bytes of a shared object (here a
copy of CPython's example extension ``xxlimited``; an attacker would ship their own) as an
extension module into the work directory and imports it, then into an anonymous memfd and
imports it from /proc/self/fd/N; calls the native function each time; trains normally.

Expected: no objective-supplied native code runs: the work directory is mounted noexec
(ImportError "failed to map segment") and seccomp refuses memfd_create (EPERM); both are
kernel refusals, so the cell trains normally (``ok``), not a violation. In exec mode
(@exec, documented weaker) the work directory is not noexec and the copy runs.
"""

import importlib.machinery
import importlib.util
import os

import torch.nn.functional as F

SPEC = importlib.util.find_spec("xxlimited")


def _load(path):
    loader = importlib.machinery.ExtensionFileLoader("xxlimited", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("xxlimited", loader))
    return module.foo(20, 22)


def _workdir(code):
    path = os.path.join(os.getcwd(), "evil" + importlib.machinery.EXTENSION_SUFFIXES[0])
    with open(path, "wb") as f:
        f.write(code)
    return _load(path)


def _memfd(code):
    fd = os.memfd_create("evil")
    os.write(fd, code)
    return _load(f"/proc/self/fd/{fd}")


if SPEC is None or not SPEC.origin:
    print("no xxlimited extension in this Python")
else:
    with open(SPEC.origin, "rb") as f:
        CODE = f.read()
    for name, attempt in (("workdir", _workdir), ("memfd", _memfd)):
        try:
            print(f"{name}: native call returned {attempt(CODE)}")
        except Exception as exc:
            print(f"{name}: failed: {type(exc).__name__}: {exc}")


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
