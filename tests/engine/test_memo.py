"""harness.contract.memo: a run's groups compute shared work once, across processes too."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from harness.contract import memo


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.ENV, str(tmp_path))
    memo.clear_local()
    yield tmp_path
    memo.clear_local()


def _count_and_sleep(log: str) -> list[int]:
    import time

    with open(log, "a") as f:
        f.write("x")
    time.sleep(0.3)  # long enough that the other process asks while this one computes
    return [1, 2, 3]


def _ask(log: str, out: multiprocessing.Queue) -> None:
    memo.clear_local()  # a fresh worker: nothing in its own memo
    out.put(memo.once("shared key", lambda: _count_and_sleep(log)))


def test_two_processes_asking_at_once_compute_it_once_and_both_get_it(run_dir):
    log = str(run_dir / "calls.log")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_ask, args=(log, out)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert got == [[1, 2, 3], [1, 2, 3]]
    assert open(log).read() == "x"


def test_a_failed_computation_leaves_nothing_and_the_next_caller_computes(run_dir):
    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        memo.once("k", fail)
    assert [p for p in os.listdir(run_dir) if not p.endswith(".lock")] == []
    assert memo.once("k", lambda: 7) == 7
    assert memo.once("k", fail) == 7  # now stored: never computed again


def test_without_a_run_directory_each_process_keeps_its_own(monkeypatch):
    monkeypatch.delenv(memo.ENV, raising=False)
    memo.clear_local()
    calls = []
    assert memo.once("a", lambda: calls.append(1) or "v") == "v"
    assert memo.once("a", lambda: calls.append(1) or "w") == "v"
    assert memo.once("b", lambda: "other") == "other"
    assert calls == [1]
    memo.clear_local()
