"""Shared code of the unlearning suites (unlearning-tofu, unlearning-muse)."""
