"""The TTA suite's tests (found by pyproject.toml's testpaths: docs/testing.md)."""
