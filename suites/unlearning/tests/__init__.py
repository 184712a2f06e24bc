"""Tests of the code both unlearning suites share, and of both suites end to end (found by
pyproject.toml's testpaths: docs/testing.md)."""
