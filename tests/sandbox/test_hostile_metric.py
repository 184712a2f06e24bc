"""Hostile objectives that go for a better score: faked metrics, swapped predictions,
faked earlier epochs, training off the protocol, carrying the test set out through output
or an error, the label files of the suite's data and the key of the secret row order
(docs/sandbox.md: why only the loss, what a hook is told). What a cheat without a
forbidden action gets is checked against plain cross-entropy on the same seed; the
worker records every request it sent a server. Each attack is a file in
tests/sandbox/hostile/, run as hostile_cases.py describes (tests/sandbox/test_cheats.py
holds the cheats that take no forbidden action at all).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.sandbox.hostile_cases import (
    CASES,
    NO_FILE,
    SUITE,
    assert_clear,
    assert_layers,
    assert_not_importable,
    assert_refused,
    assert_scores_as_ce,
    attack,
    cases_of,
    kernel_answers,
    needs_kernel,
)
from tests.sandbox.hostile_corpus import Run

# --- faking what is judged -----------------------------------------------------------------------


@attack("fake_metrics")
def test_faked_metrics_inside_do_not_change_the_judged_ones(corpus):
    run = corpus.run("fake_metrics")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.9 and r.metrics["train_acc_clean"] < 0.9


@attack("swap_predictions")
def test_predictions_cannot_be_swapped_from_inside(corpus):
    run = corpus.run("swap_predictions")
    r = assert_scores_as_ce(run, corpus)
    assert "found: nothing; wrapper called 0 times" in r.captured, r.captured


@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_leave_the_final_accuracy_honest(corpus):
    run = corpus.run("fake_earlier_epochs")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.9
    assert "found no x_eval; wrapper called 0 times" in r.captured, r.captured


@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_do_not_inflate_the_best_epoch(corpus):
    # every epoch's predictions are the worker's own: 1-NN on the training set would
    # have reported best_test_acc ~0.98 at best_epoch 1
    r = corpus.result("fake_earlier_epochs")
    assert r.metrics["best_test_acc"] < 0.9, r.metrics


@attack("off_protocol_training")
def test_training_off_the_protocol_does_not_improve_the_score(corpus):
    run = corpus.run("off_protocol_training")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.7, r.metrics  # one epoch, not eight
    assert "wrapped train_members called 0 times" in r.captured, r.captured


# --- the test set, the labels and the row order --------------------------------------------------


def _rows_sent(run: Run) -> list[int]:
    """The rows of every request the worker sent (each one member's batch)."""
    batch = SUITE.settings["batch_size"]
    rows = []
    for hook, shapes in run.sent:
        assert hook == "classification_loss"
        assert len({shape[:2] for shape in shapes}) == 1, shapes  # one batch in each tensor
        members, count = shapes[0][:2]
        assert members == 1 and 0 < count <= batch, shapes
        assert run.job["test"] not in [d for shape in shapes for d in shape], shapes
        rows.append(count)
    return rows


@attack("exfiltrate_test_set@output")
def test_a_server_is_given_its_own_batches_only(corpus):
    run = corpus.run("exfiltrate_test_set@output")
    r = assert_scores_as_ce(run, corpus)
    assert r.info["sandbox"]["served"]["classification_loss"].startswith("per call")
    assert run.traced == []  # progress and state in its context: never a graph
    # the worker's record: one epoch of training batches, nothing the size of the test set
    assert sum(_rows_sent(run)) == run.job["train"], (run.sent, run.job)
    # the server's own account: the same batches, and the targets of the training set
    rows = [int(n) for n in re.findall(r"^call \d+: rows=(\d+) ", r.captured, re.M)]
    assert rows == _rows_sent(run), r.captured[:3000]
    seen = [int(t) for line in re.findall(r"^targets \d+: \[(.*)\]$", r.captured, re.M)
            for t in line.split(",")]
    assert np.array_equal(np.bincount(seen, minlength=10),
                          np.bincount(run.job["labels"][0], minlength=10))


@attack("exfiltrate_test_set@error")
def test_an_error_carries_no_more_than_a_servers_own_batches(corpus):
    run = corpus.run("exfiltrate_test_set@error")
    r = assert_clear(run, "failed", "objective", "everything I was given", "call 1 logits")
    assert len(r.error) <= 20_000 + 1000  # a server's error text is capped (five full
    # batches are longer: the dump is cut)
    assert len(_rows_sent(run)) == 5 and not r.metrics
    assert "call 6" not in r.error


@pytest.mark.parametrize("case", cases_of("digits_labels"))
def test_the_suites_label_files_are_out_of_reach(corpus, case):
    run = corpus.run(case)
    if CASES[case].param == "import":
        assert_not_importable(run, "sklearn")
    else:  # the guard sees the path first (the kernel: not in the minimal root)
        assert_refused(run, r"reading /\S*/site-packages/sklearn/datasets/data/digits\.csv\.gz",
                       pattern=True)
    assert "labels:" not in run.result.captured and "bytes of digits" not in run.result.captured


@attack("row_key")
def test_the_row_order_key_is_out_of_reach(corpus):
    run = corpus.run("row_key")
    r = assert_refused(run, f"reading {corpus.key_file}")
    assert "environment key: None" in r.captured, r.captured  # the scrubbed environment
    assert corpus.key.decode(errors="replace") not in run.text


@needs_kernel
@attack("row_key@kernel")
def test_kernel_alone_keeps_the_row_order_key_out_of_reach(corpus):
    run = corpus.run("row_key@kernel")
    r = assert_scores_as_ce(run, corpus)
    assert "environment key: None" in r.captured, r.captured
    assert kernel_answers(r.captured).get("key file") in NO_FILE, r.captured
    assert corpus.key.decode(errors="replace") not in run.text
    assert_layers(run, python_guard=False)
