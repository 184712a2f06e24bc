"""Keyed draws (harness.contract.draws): with a key every stream a loss could precompute
from public code and seeds moves, reproducibly, and nothing public changes without one."""

from __future__ import annotations

import numpy as np
import pytest

from harness.contract import draws, seeding
from harness.contract.registry import get_suite
from harness.data.digits import digits_split
from harness.train.batches import epoch_orders

KEY = "a-key-for-the-tests-only"


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv(draws.KEY_ENV, KEY)
    monkeypatch.delenv(draws.KEY_FILE_ENV, raising=False)


def test_without_a_key_the_public_streams_are_unchanged(monkeypatch):
    monkeypatch.delenv(draws.KEY_ENV, raising=False)
    monkeypatch.delenv(draws.KEY_FILE_ENV, raising=False)
    assert draws.fingerprint() == "public" and draws.seed(1234, "x") == 1234
    # the value the pinned results were drawn with (SeedSequence of hashed words)
    words = [3, seeding._word("order")]
    state = np.random.SeedSequence(words).generate_state(2, dtype=np.uint32)
    assert seeding.stream_seed(3, "order") == ((int(state[0]) << 32 | int(state[1]))
                                               & ((1 << 63) - 1))


def test_a_key_moves_every_stream_reproducibly(keyed, monkeypatch):
    public_orders = None
    with monkeypatch.context() as m:
        m.delenv(draws.KEY_ENV)
        public = (seeding.stream_seed(0, "order"), digits_split()[1])
        public_orders = epoch_orders([0], 100, 2)
    first = (seeding.stream_seed(0, "order"), digits_split()[1])
    assert first[0] != public[0] and seeding.stream_seed(0, "order") == first[0]
    assert not np.array_equal(first[1], public[1])  # another split: other training samples
    assert np.bincount(first[1]).tolist() == np.bincount(public[1]).tolist()  # stratified
    assert not np.array_equal(epoch_orders([0], 100, 2), public_orders)
    assert draws.seed(1234, "x") != 1234 and draws.seed(1234, "x") < 2**32
    fp = draws.fingerprint()
    m_key = "another-key-entirely"
    monkeypatch.setenv(draws.KEY_ENV, m_key)
    assert seeding.stream_seed(0, "order") != first[0] and draws.fingerprint() != fp


def test_keyed_cells_and_fixtures_are_named_apart(keyed, monkeypatch):
    from harness.data import fixtures

    suite = get_suite("tta")
    variant, fixture = suite.variant(suite.ranked_variants[0]), suite.fixtures[0]
    keyed_hash, keyed_fixture = variant.config_hash(suite), fixtures.key(suite, fixture, 0)
    monkeypatch.delenv(draws.KEY_ENV)
    assert variant.config_hash(suite) != keyed_hash
    assert fixtures.key(suite, fixture, 0) != keyed_fixture


def test_keyed_results_have_a_database_of_their_own(keyed, monkeypatch, tmp_path):
    from harness.storage.settings import database_from_url

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    keyed_db = database_from_url(None)["NAME"]
    assert keyed_db == str(tmp_path / f"draws-{draws.fingerprint()}" / "harness.sqlite3")
    monkeypatch.delenv(draws.KEY_ENV)
    assert database_from_url(None)["NAME"] == str(tmp_path / "harness.sqlite3")


@pytest.mark.parametrize("text,error", [("short", "at least 16"), ("", "at least 16")])
def test_a_key_file_too_short_is_refused(tmp_path, text, error):
    path = tmp_path / "key"
    path.write_text(text + "\n")
    with pytest.raises(draws.DrawsKeyError, match=error):
        draws.read_key_file(path)
    with pytest.raises(draws.DrawsKeyError, match="cannot read"):
        draws.read_key_file(tmp_path / "missing")


def test_the_cli_names_a_bad_key_file_and_runs_nothing(tmp_path, capsys):
    from harness.cli import main

    with pytest.raises(SystemExit) as exit_:  # argparse's usage error, before anything runs
        main(["run", "suite", "noisy-labels", "-o", "ce", "--draws-key", str(tmp_path / "nope")])
    assert exit_.value.code == 2
    assert "cannot read the draws key file" in capsys.readouterr().err


def test_the_key_never_reaches_a_sandboxed_process(keyed):
    from harness.sandbox.launch import environment

    env = environment(None, 1, "cpu")
    assert KEY not in "".join(env.values()) and draws.KEY_ENV not in env
