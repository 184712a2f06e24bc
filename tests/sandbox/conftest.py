"""The hostile corpus's fixture for the test_hostile_*.py modules here (hostile_cases.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandbox.hostile_corpus import Corpus, corpus_for


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """The corpus of this test module: the cases its selected tests use, started at once."""
    yield from corpus_for(request, tmp_path_factory)
