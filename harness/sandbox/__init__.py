"""Running untrusted objectives: only their loss runs here, in isolated children (docs/sandbox.md).

The entry points are re-exported lazily: the sandboxed child itself starts as
``python -I -m harness.sandbox.child``, which imports this package first, and must not
pull in the trainer-side modules (registry, pipelines) that :mod:`harness.sandbox.validation` needs.
Training with the loss served from here is :mod:`harness.runner.sandboxed`.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "validate_sandboxed": "harness.sandbox.validation",
    "VALIDATION_LIMITS": "harness.sandbox.validation",
    "SandboxUnavailable": "harness.sandbox.launch",
    "isolation_support": "harness.sandbox.launch",
    "Limits": "harness.sandbox.process",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.sandbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
