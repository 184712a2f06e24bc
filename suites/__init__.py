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


def suite_at(name: str, version: str) -> Suite:
    """The registry's suite at a stored version, including a shortened ``V+eN`` version."""
    import re

    suite = get_suite(name)
    if version == suite.version:
        return suite
    match = re.fullmatch(re.escape(suite.version) + r"\+e(\d+)", version)
    if match is None:
        raise LookupError(f"suite {name} version {version} is no longer available "
                          f"(current version: {suite.version})")
    return suite.shortened(int(match.group(1)))
