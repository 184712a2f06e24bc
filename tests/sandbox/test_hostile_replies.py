"""Hostile objectives that lie on the wire: pickles, size bombs and forged verdicts in
their replies, a graph that would make the worker hold too much, a hello of the wrong
types, a forged isolation record, a forged violation report and terminal escapes in what
they print (docs/sandbox.md: the protocol, reading what comes back). The worker takes
nothing from a server but what it sized itself. Each attack is a file in
tests/sandbox/hostile/, run as hostile_cases.py describes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sandbox.hostile_cases import (
    METRICS,
    WORKER_GROWTH,
    assert_clear,
    assert_layers,
    assert_scores_as_ce,
    attack,
)

# --- replies and graphs --------------------------------------------------------------------------


@attack("pickle_object_array")
def test_files_a_server_leaves_are_never_read(corpus):
    run = corpus.run("pickle_object_array")
    assert_scores_as_ce(run, corpus)
    assert not Path(run.tokens["__HOSTILE_PICKLE_MARKER__"]).exists()


@attack("pickle_raw_file")
def test_a_pickle_sent_as_a_reply_is_never_unpickled(corpus):
    run = corpus.run("pickle_raw_file")
    assert_clear(run, "failed", "invalid-output", "broke the protocol",
                 "a reply header that is not JSON")
    assert not Path(run.tokens["__HOSTILE_PICKLE_MARKER__"]).exists()


@pytest.mark.parametrize(("case", "why"), [
    ("zip_bomb_outputs", "a reply header of 4,294,967,295 bytes"),
    ("npy_header_bomb", "more bytes than a reply holds")])
def test_a_size_bomb_in_a_reply_is_refused_without_allocating_it(corpus, case, why):
    run = corpus.run(case)
    assert_clear(run, "failed", "invalid-output", "broke the protocol", why)
    if run.peak_growth is None:
        pytest.skip("cannot reset the peak RSS (/proc/self/clear_refs) here")
    assert run.peak_growth < WORKER_GROWTH, f"the worker grew by {run.peak_growth >> 20} MiB"


@attack("graph_bomb")
def test_a_graph_cannot_make_the_worker_hold_more_than_a_bound(corpus):
    """Intermediates each under the bound, together far over it: the worker does not run
    the graph (the sum is bounded too) and the hook is served per call, in the sandbox."""
    run = corpus.run("graph_bomb")
    r = assert_scores_as_ce(run, corpus)
    assert r.info["sandbox"]["served"]["classification_loss"].startswith(
        "per call: the traced hook's intermediates add up to"), r.info["sandbox"]["served"]
    if run.peak_growth is not None:
        assert run.peak_growth < WORKER_GROWTH, f"the worker grew by {run.peak_growth >> 20} MiB"


@attack("tamper_report@forged_ok")
def test_a_forged_reply_is_scored_as_what_it_answered(corpus):
    run = corpus.run("tamper_report@forged_ok")
    r = assert_clear(run, "ok", "")  # its error was turned into an answer: judged as one
    assert set(r.metrics) == METRICS
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])  # from the weights
    # zero gradients on every call: the untrained model, about one digit in ten
    assert r.metrics["test_acc"] < 0.2 and r.metrics["train_acc_clean"] < 0.2, r.metrics
    assert r.info["sandbox"]["served"]["classification_loss"].startswith("per call")
    assert len(run.sent) > 1  # answered call after call


@attack("tamper_report@forged_ok")
def test_a_forged_reply_does_not_forge_the_wall_time(corpus):
    run = corpus.run("tamper_report@forged_ok")
    assert 0.05 < run.result.wall_time <= run.seconds, (run.result.wall_time, run.seconds)


@attack("tamper_report@no_verdict")
def test_a_reply_without_a_verdict_fails_the_cell(corpus):
    r = corpus.result("tamper_report@no_verdict")
    assert r.status == "failed" and not r.metrics, (r.status, r.metrics)
    assert "1.0" not in r.error and "0.001" not in r.error, r.error  # nothing of its header


@attack("tamper_report@no_verdict")
def test_a_reply_without_a_verdict_is_an_invalid_output(corpus):
    assert_clear(corpus.run("tamper_report@no_verdict"), "failed", "invalid-output",
                 "broke the protocol")


@attack("report_recursion_bomb")
def test_a_recursion_bomb_reply_fails_the_cell(corpus):
    run = corpus.run("report_recursion_bomb")
    assert run.raised is None, run.raised
    assert_clear(run, "failed", "invalid-output", "a reply header that is not JSON",
                 "RecursionError")


# --- the hello and the isolation record ----------------------------------------------------------


@attack("report_bad_types", "fake_metrics")
def test_a_hello_with_wrong_types_is_reduced_to_what_the_worker_expects(corpus):
    run = corpus.run("report_bad_types")
    r = assert_scores_as_ce(run, corpus)
    assert isinstance(r.wall_time, float) and 0.05 < r.wall_time <= run.seconds
    assert {**assert_layers(run), "row_order": None} == {
        **corpus.result("fake_metrics").info["sandbox"], "row_order": None}
    # the hook's own two tensors, never an ``index`` it declared it wanted
    assert run.traced or run.sent
    assert all(len(shapes) == 2 for _, shapes in run.traced + run.sent), (run.traced, run.sent)


@attack("hide_violations@junk", "fake_metrics")
def test_the_isolation_record_cannot_be_forged(corpus):
    record = assert_layers(corpus.run("hide_violations@junk"))
    honest = corpus.result("fake_metrics").info["sandbox"]
    assert record["served"] == {}  # it ended before its hook was ever asked for
    # every field but what differs by objective: the hooks served and its row-order key
    assert {**record, "served": None, "row_order": None} == {
        **honest, "served": None, "row_order": None}
    assert len(record["row_order"]) == 16 and record["row_order"] != honest["row_order"]


# --- what a server prints ------------------------------------------------------------------------


@attack("forged_violation")
def test_a_forged_violation_report_is_only_output(corpus):
    run = corpus.run("forged_violation")
    r = assert_scores_as_ce(run, corpus)
    assert r.error == ""
    forged = "[sandbox violation] sandbox: reading /etc/passwd is not allowed (load, std"
    assert f"{forged}out)" in r.captured and f"{forged}err)" in r.captured, r.captured


@attack("terminal_escapes")
def test_terminal_escapes_are_stored_as_printed(corpus):
    run = corpus.run("terminal_escapes")
    r = assert_scores_as_ce(run, corpus)
    for sequence in ("\x1b]0;owned by the objective\x07", "\x1b]52;c;cm0gLXJmIH4K\x07",
                     "\x1b[2J\x1b[H", "\x9b31mcsi\x9b0m", "all good\r\x1b[Kfaked line\x08\x08",
                     "nul\x00byte"):
        assert f"load: {sequence}" in r.captured, (sequence, r.captured)
