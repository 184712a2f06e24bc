"""Suite fixtures (harness.data.fixtures): built once, content-addressed, checked on every read,
rebuilt when a check fails, built once even when two processes ask at the same time."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.contract.pipeline import Pipeline
from harness.contract.suite import Anchors, Fixture, MetricSpec, Suite, SuiteError, Variant
from harness.data import fixtures
from harness.runner.environment import using_threads

CALLS = Path(os.environ.get("FIXTURE_CALLS", "/nonexistent"))


def build_counted(config: dict, seed: int | None) -> dict[str, np.ndarray]:
    """A builder that records each call (in $FIXTURE_CALLS) and is slow enough to race."""
    with open(config.get("calls") or os.environ["FIXTURE_CALLS"], "a") as f:
        f.write(f"{seed}\n")
    time.sleep(float(config.get("sleep", 0)))
    rng = np.random.default_rng(seed)
    return {"weights": rng.standard_normal((3, 4)).astype(np.float32),
            "scale": np.array(float(config.get("scale", 1.0)))}


def build_threads(config: dict, seed: int | None) -> dict[str, np.ndarray]:
    """Records the torch threads it trains with."""
    import torch

    return {"threads": np.array(torch.get_num_threads())}


def build_bad(config: dict, seed: int | None) -> object:
    return [1, 2, 3]


def suite(**fixture_changes) -> Suite:
    fixture = Fixture("model", "tests.engine.test_fixtures:build_counted", {"scale": 2.0})
    return Suite(name="fx", version="1.0", description="d", hooks=("classification_loss",),
                 headline="acc", metrics=(MetricSpec("acc", "accuracy"),),
                 anchors={"acc": Anchors(0.0, 1.0)}, variants=(Variant("v", {}, "v"),),
                 pipeline="x.y:Z", baselines=("ce",),
                 fixtures=(replace(fixture, **fixture_changes),))


@pytest.fixture
def calls(tmp_path, monkeypatch):
    path = tmp_path / "calls.txt"
    path.write_text("")
    monkeypatch.setenv("FIXTURE_CALLS", str(path))
    monkeypatch.setenv(fixtures.ENV, str(tmp_path / "cache"))
    return lambda: path.read_text().split()


def test_built_once_then_reused_bit_identical(calls):
    ledger = fixtures.Ledger()
    first = fixtures.load(suite(), "model", 3, ledger=ledger)
    second = fixtures.load(suite(), "model", 3, ledger=ledger)
    assert first.built and not second.built
    assert calls() == ["3"]
    assert first.key == second.key
    assert np.array_equal(first.arrays["weights"], second.arrays["weights"])
    assert ledger.summary().startswith("1 reused, 1 built")


def test_key_covers_seed_config_version_and_builder(calls):
    s = suite()
    base = fixtures.key(s, s.fixture("model"), 0)
    assert fixtures.key(s, s.fixture("model"), 1) != base
    assert fixtures.key(s, s.fixture("model"), 0, {"scale": 3.0}) != base
    assert fixtures.key(replace(s, version="1.1"), s.fixture("model"), 0) != base
    # A shortened (+eN) run of the same base version shares its fixtures.
    assert fixtures.key(replace(s, version="1.0+e3"), s.fixture("model"), 0) == base
    other = suite(config={"scale": 2.5}).fixture("model")
    assert fixtures.key(s, other, 0) != base


def test_a_change_to_the_code_it_names_builds_anew(calls, tmp_path, monkeypatch):
    package = tmp_path / "codedep_pkg"
    package.mkdir()
    module = package / "fxmodel.py"
    module.write_text("WIDTH = 4\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    s = suite(code=("codedep_pkg.fxmodel",))
    before = fixtures.key(s, s.fixture("model"), 0)
    time.sleep(0.01)
    module.write_text("WIDTH = 8  # a different model\n")
    sys.modules.pop("codedep_pkg.fxmodel", None)
    assert fixtures.key(s, s.fixture("model"), 0) != before


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "drop the manifest",
                                    "wrong checksum", "foreign arrays"])
def test_a_damaged_entry_is_rebuilt_not_trusted(calls, damage):
    s = suite()
    first = fixtures.load(s, "model", 0)
    folder = fixtures.root() / "fx" / "model"
    archive, manifest = folder / f"{first.key}.npz", folder / f"{first.key}.json"
    if damage == "flip a byte":
        blob = bytearray(archive.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        archive.write_bytes(bytes(blob))
    elif damage == "truncate":
        archive.write_bytes(archive.read_bytes()[:100])
    elif damage == "drop the manifest":
        manifest.unlink()
    elif damage == "wrong checksum":
        about = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**about, "sha256": "0" * 64}))
    else:  # a valid archive with other arrays in it, and a manifest to match its bytes
        import hashlib
        import io

        buffer = io.BytesIO()
        np.savez(buffer, weights=np.zeros((3, 4), np.float32))
        archive.write_bytes(buffer.getvalue())
        about = json.loads(manifest.read_text())
        manifest.write_text(json.dumps(
            {**about, "sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}))
    ledger = fixtures.Ledger()
    again = fixtures.load(s, "model", 0, ledger=ledger)
    assert again.built and ledger.rebuilt == [first.key]
    assert np.array_equal(again.arrays["weights"], first.arrays["weights"])
    assert fixtures.load(s, "model", 0).built is False  # and the rebuilt entry is good
    assert calls() == ["0", "0"]


def test_fixtures_build_with_one_torch_thread_whatever_the_process_has(calls):
    """CPU kernels split sums by thread count: a model trained with 2 threads is not the
    one trained with 1, so an entry must not depend on the machine that built it."""
    import torch

    with using_threads(2):
        built = fixtures.load(suite(builder="tests.engine.test_fixtures:build_threads"), "model", 0)
        assert int(built.arrays["threads"]) == 1
        assert torch.get_num_threads() == 2  # the process's own setting is given back


def test_a_builder_returning_something_else_is_an_error(calls):
    s = suite(builder="tests.engine.test_fixtures:build_bad")
    with pytest.raises(fixtures.FixtureError, match="dict of numpy arrays"):
        fixtures.load(s, "model", 0)
    assert not list((fixtures.root() / "fx" / "model").glob("*.npz"))


def _load_in_child(cache: str, calls: str, start) -> None:
    os.environ[fixtures.ENV], os.environ["FIXTURE_CALLS"] = cache, calls
    start.wait(60)  # both processes imported: they ask for the entry together
    fixtures.load(suite(config={"scale": 2.0, "sleep": 0.5}), "model", 7)


def test_two_processes_build_an_entry_once(calls, tmp_path):
    # spawned, not forked: a fork of a pytest-xdist worker can copy a lock its I/O thread
    # holds, and hang
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_load_in_child, args=(os.environ[fixtures.ENV],
                                                      os.environ["FIXTURE_CALLS"], start))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert calls() == ["7"]
    folder = fixtures.root() / "fx" / "model"
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left


def test_declarations_are_checked():
    with pytest.raises(SuiteError, match="fixture names repeat"):
        replace(suite(), fixtures=suite().fixtures * 2)
    with pytest.raises(SuiteError, match="builder must be"):
        suite(builder="no_colon")
    with pytest.raises(SuiteError, match="config must be JSON"):
        suite(config={"f": object()})
    with pytest.raises(KeyError, match="declares no fixture"):
        suite().fixture("other")


def test_builder_source_is_part_of_the_key(calls, tmp_path, monkeypatch):
    module = tmp_path / "fxbuilder_mod.py"
    module.write_text(textwrap.dedent("""
        import numpy as np
        def build(config, seed):
            return {"a": np.zeros(2)}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    s = suite(builder="fxbuilder_mod:build")
    before = fixtures.key(s, s.fixture("model"), 0)
    module.write_text(module.read_text().replace("np.zeros(2)", "np.ones(2)"))
    sys.modules.pop("fxbuilder_mod", None)
    assert fixtures.key(s, s.fixture("model"), 0) != before


class PerSeedModel(Pipeline):
    """A pipeline whose every seed needs the ``model`` fixture (only ``fixtures`` runs)."""

    def fixtures(self, suite, variants, seeds):
        # the calls file rides in the config: a fork server started earlier in the session
        # keeps the environment it started with
        return [("model", s, {"sleep": 0.2, "calls": os.environ["FIXTURE_CALLS"]})
                for s in seeds]

    def prepare(self, suite, variants, seeds, **options):
        raise NotImplementedError

    def train(self, suite, objective, inputs, plan, **options):
        raise NotImplementedError

    def judge(self, suite, job, output, **options):
        raise NotImplementedError


def test_missing_fixtures_are_built_in_parallel_and_equal_a_serial_build(calls, tmp_path):
    from harness.runner.jobs import prepare_fixtures

    s = replace(suite(), pipeline="tests.engine.test_fixtures:PerSeedModel", chunk=1)
    config = {"sleep": 0.2, "calls": os.environ["FIXTURE_CALLS"]}
    fixtures.load(s, "model", 0, config)  # one is stored already
    said = []
    summary = prepare_fixtures(s, [s.variant("v")], [0, 1, 2, 3], workers=2, say=said.append)
    assert summary.startswith("1 reused, 3 built")
    assert said == [f"fx: building 3 fixtures (model), once per machine: they are cached in "
                    f"{fixtures.root()}"]
    assert sorted(calls()) == ["0", "1", "2", "3"]  # each built once, in whichever process
    again = prepare_fixtures(s, [s.variant("v")], [0, 1, 2, 3], workers=2)
    assert again.startswith("4 reused, 0 built") and len(calls()) == 4
    for seed in (1, 3):  # what the workers stored is what this process builds
        stored = fixtures.load(s, "model", seed, config).arrays
        fresh = build_counted({"sleep": 0, "scale": 2.0}, seed)
        assert all(np.array_equal(stored[k], fresh[k]) for k in fresh)
