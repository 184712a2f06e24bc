"""Suite registry by name; each suite's package declares a ``SUITE`` without importing torch."""

from __future__ import annotations

import importlib

from suites.base import Suite

_REGISTRY = {
    "noisy-labels": "suites.noisy_labels",
    "certified": "suites.certified",
}


def suite_names() -> list[str]:
    return list(_REGISTRY)


def get_suite(name: str) -> Suite:
    if name not in _REGISTRY:
        raise KeyError(f"unknown suite {name!r} (suites: {', '.join(_REGISTRY)})")
    return importlib.import_module(_REGISTRY[name]).SUITE
