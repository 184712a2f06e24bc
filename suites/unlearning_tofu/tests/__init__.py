"""The TOFU unlearning suite's own tests; those it shares with MUSE are in
suites/unlearning/tests (found by pyproject.toml's testpaths: docs/testing.md)."""
