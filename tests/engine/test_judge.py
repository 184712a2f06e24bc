"""Known-answer tests for the noisy-label judge (metrics computed outside the objective),
and for the part of judging the contract does for every suite
(``harness.contract.judging.cell_results``, the output checks of
``harness.contract.outputs``, the reliability curves)."""

import numpy as np
import pytest

from harness.contract.judging import Failure, cell_results
from harness.contract.outputs import check_array, probability_rows
from harness.contract.pipeline import InvalidOutput, Job, TrainOutput
from harness.contract.reliability import reliability_curves
from harness.contract.suite import ReliabilitySpec
from suites.noisy_labels.metrics import judge_member
from suites.noisy_labels.pipeline import Dataset

Y_TRAIN = np.array([0, 1, 2, 0, 1, 2, 0, 1])
# flipped: index 1 (1→2), 3 (0→1), 6 (0→2)
NOISY = np.array([0, 2, 2, 1, 1, 2, 2, 1])
# flipped predictions: 1 → 2 (noisy, memorized), 3 → 0 (clean, corrected), 6 → 2 (memorized)
# vs clean labels: right at 0, 2, 3, 4, 7 → 5/8
TRAIN_PRED = np.array([0, 2, 2, 0, 1, 1, 2, 1])
Y_TEST = np.array([0, 1, 2, 1])
EVAL_PRED = np.array([
    [0, 0, 0, 0],  # 1/4
    [0, 1, 2, 0],  # 3/4  <- first best
    [0, 1, 2, 2],  # 3/4  (tie: best_epoch stays the first)
    [0, 1, 0, 0],  # 2/4  <- last
])


def dataset() -> Dataset:
    x_train = np.zeros((len(Y_TRAIN), 2), dtype=np.float32)
    x_test = np.zeros((len(Y_TEST), 2), dtype=np.float32)
    return Dataset(x_train, Y_TRAIN, x_test, Y_TEST, num_classes=3)


def judge(*args):
    return judge_member(*args)[0]


def test_judge_known_metrics():
    metrics, curves = judge_member(dataset(), NOISY, EVAL_PRED, TRAIN_PRED)
    assert metrics == pytest.approx({
        "test_acc": 0.5,
        "best_test_acc": 0.75,
        "best_epoch": 2.0,
        "noise_rate": 0.375,
        "train_acc_clean": 0.625,
        "memorization": 2 / 3,
        "correction": 1 / 3,
    }, abs=1e-12)
    assert curves == {"test_acc": pytest.approx([0.25, 0.75, 0.75, 0.5])}
    assert all(isinstance(v, float) for v in metrics.values())


def test_judge_no_noise_has_no_memorization_or_correction():
    metrics = judge(dataset(), Y_TRAIN.copy(), EVAL_PRED, TRAIN_PRED)
    assert metrics["noise_rate"] == 0.0
    assert metrics["train_acc_clean"] == 0.625
    assert metrics["test_acc"] == 0.5
    assert "memorization" not in metrics
    assert "correction" not in metrics


def test_judge_single_epoch_and_small_int_dtypes():
    metrics = judge(dataset(), NOISY, EVAL_PRED[1:2].astype(np.uint8),
                    TRAIN_PRED.astype(np.int32))
    assert metrics["test_acc"] == 0.75
    assert metrics["best_test_acc"] == 0.75
    assert metrics["best_epoch"] == 1.0
    assert metrics["memorization"] == pytest.approx(2 / 3)


def test_judge_all_memorized():
    metrics = judge(dataset(), NOISY, EVAL_PRED, NOISY.copy())
    assert metrics["memorization"] == 1.0
    assert metrics["correction"] == 0.0
    assert metrics["train_acc_clean"] == 0.625


@pytest.mark.parametrize(("eval_pred", "train_pred", "match"), [
    (EVAL_PRED[:, :3], TRAIN_PRED, r"shape \(4, 4\)"),             # test predictions too short
    (EVAL_PRED[0], TRAIN_PRED, r"shape \(4, 4\)"),                 # no epoch axis
    (EVAL_PRED, TRAIN_PRED[:7], r"shape \(8,\)"),                  # train predictions too short
    (EVAL_PRED, TRAIN_PRED[None, :], r"shape \(8,\)"),             # extra axis
    (EVAL_PRED.astype(np.float32), TRAIN_PRED, "integer class ids"),
    (EVAL_PRED, TRAIN_PRED.astype(np.float64), "integer class ids"),
    (EVAL_PRED, TRAIN_PRED.astype(bool), "integer class ids"),
    (EVAL_PRED + 1, TRAIN_PRED, r"\[0, 2\]"),                      # class 3 out of range
    (EVAL_PRED, TRAIN_PRED - 1, r"\[0, 2\]"),                      # class -1 out of range
])
def test_judge_rejects_bad_predictions(eval_pred, train_pred, match):
    with pytest.raises(ValueError, match=match):
        judge(dataset(), NOISY, eval_pred, train_pred)


# --- the contract's part: cells from per-member results --------------------------------


def job(members=4):
    return Job([("v", s) for s in range(members)], {}, {})


def output(**info):
    return TrainOutput({}, {"mode": "vmap", "fallback_reason": "", "wall_time": 8.0, **info})


def scored(i):
    return {"m": float(i)}, {"eval": [float(i)]}


def test_cells_from_member_results_and_divergence():
    calls = []

    def member(i):
        calls.append(i)
        return scored(i)

    cells = cell_results(job(), output(), member, diverged=np.array([-1, 4, 0, -1]),
                         training=lambda i: {"loss": [1.0, 2.0, 3.0, 4.0]}, steps_per_point=3,
                         kept=lambda i: {"kept": 1.0}, info={"suite": "x"},
                         member_info=lambda i: {"i": i})
    assert calls == [0, 3]  # a diverged member is never scored
    assert [(c.seed, c.status, c.diverged_step) for c in cells] == [
        (0, "ok", None), (1, "diverged", 4), (2, "diverged", 0), (3, "ok", None)]
    assert cells[0].metrics == {"m": 0.0}
    assert cells[0].curves == {"loss": [1.0, 2.0, 3.0, 4.0], "eval": [0.0]}  # training first
    assert cells[1].metrics == {"kept": 1.0} and cells[1].curves == {"loss": [1.0, 2.0]}
    assert cells[2].curves == {"loss": [1.0]}  # the point of step 0
    assert {c.wall_time for c in cells} == {2.0}
    assert cells[3].info == {"mode": "vmap", "fallback_reason": "", "members_batched": 4,
                             "suite": "x", "i": 3}


def test_cells_without_divergence_training_curves_or_a_wall_time():
    cells = cell_results(job(2), TrainOutput({}, {}), scored, diverged=None)
    assert [c.status for c in cells] == ["ok", "ok"]
    assert cells[1].curves == {"eval": [1.0]} and cells[1].wall_time == 0.0
    assert cells[0].info == {"mode": "", "fallback_reason": None, "members_batched": 2}
    timed = cell_results(job(2), output(), scored, diverged=None, seconds=5.0)
    assert timed[0].wall_time == 2.5


def test_a_diverged_member_without_training_curves_keeps_none():
    cells = cell_results(job(2), output(), scored, diverged=[3, -1])
    assert (cells[0].status, cells[0].metrics, cells[0].curves) == ("diverged", {}, {})


def test_failures_and_divergence_at_the_start():
    def member(i):
        if i == 1:
            return Failure("returned nonsense")
        if i == 2:
            return Failure("harness bug", "infrastructure", curves=True)
        return scored(i)

    cells = cell_results(job(), output(), member, diverged=np.array([-1, -1, -1, 0]),
                         training=lambda i: {"loss": [1.0]}, steps_per_point=1,
                         fails_at_start="not finite at the first step")
    assert [(c.status, c.reason, c.error) for c in cells] == [
        ("ok", "", ""), ("failed", "invalid-output", "returned nonsense"),
        ("failed", "infrastructure", "harness bug"),
        ("failed", "invalid-output", "not finite at the first step")]
    assert cells[1].curves == {} and cells[2].curves == {"loss": [1.0]}
    assert cells[3].diverged_step is None and cells[1].metrics == {}


def test_training_curves_need_their_steps_per_point():
    with pytest.raises(ValueError, match="steps_per_point"):
        cell_results(job(), output(), scored, diverged=None, training=lambda i: {})


def test_an_invalid_output_found_while_scoring_refuses_the_job():
    def member(i):
        raise InvalidOutput("non-finite parameters")

    with pytest.raises(InvalidOutput, match="non-finite parameters"):
        cell_results(job(), output(), member, diverged=None)


@pytest.mark.parametrize("value, args, message", [
    (None, ((2,), "f"), "the trainer returned no 'a'"),
    (np.zeros(2, np.float32), ((2,), "iu"), r"a: expected integer values \(kind 'iu'\), "
                                            r"got float32"),
    (np.zeros(2, np.int64), ((2,), "f"), "a: expected floating values"),
    (np.zeros(2, object), ((2,), "f"), "got object"),
    ([0.0, 1.0], ((2,), "f"), "got list"),
    (np.zeros(3), ((2,), "f"), r"a must have shape \(2,\), got \(3,\)"),
    (np.array([0.0, np.nan]), ((2,), "f"), None),
    (np.array([-2, 0]), ((2,), "iu"), None),
])
def test_check_array(value, args, message):
    arrays = {} if value is None else {"a": value}
    if message is None:
        assert check_array(arrays, "a", *args) is value
    else:
        with pytest.raises(InvalidOutput, match=message):
            check_array(arrays, "a", *args)


def test_check_array_bounds_and_finiteness():
    a = {"a": np.array([0.0, np.nan])}
    with pytest.raises(InvalidOutput, match="a contains non-finite values"):
        check_array(a, "a", (2,), "f", finite=True)
    with pytest.raises(InvalidOutput, match="a has values below -1"):
        check_array({"a": np.array([-2, 0])}, "a", (2,), "iu", low=-1)
    with pytest.raises(InvalidOutput, match="a has values above 3"):
        check_array({"a": np.array([4, 0])}, "a", (2,), "iu", high=3)


GOOD = np.array([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5]], np.float32)


@pytest.mark.parametrize("row, value, summary, located", [
    (1, [np.nan, 1.0], "returned 1 non-finite probabilities (NaN or inf)",
     "returned non-finite probabilities at row 1"),
    (2, [1.2, -0.2], "returned probabilities outside [0, 1] (min -0.2, max 1.2)",
     "returned probabilities outside [0, 1] at row 2"),
    (0, [0.3, 0.3], "returned rows that do not sum to 1 (off by up to 0.4; tolerance 0.001)",
     "returned rows that do not sum to 1 at row 0"),
])
def test_probability_rows_name_the_first_problem(row, value, summary, located):
    probs = GOOD.copy()
    probs[row] = value
    assert probability_rows(probs) == summary
    assert probability_rows(probs, at=lambda r: f"at row {r}") == located
    assert probability_rows(GOOD) == "" and probability_rows(GOOD[:0]) == ""


def test_probability_rows_slack_and_leading_axes():
    probs = np.array([[[-1e-7, 1.0]], [[0.5, 0.5]]])  # [2, 1, K]: rows over two axes
    assert "outside [0, 1]" in probability_rows(probs)
    assert probability_rows(probs, slack=1e-6) == ""
    probs[1, 0] = [0.5, 0.6]
    assert probability_rows(probs, slack=1e-6, at=str) == "returned rows that do not sum to 1 1"


def test_reliability_curves_average_each_bin():
    spec = ReliabilitySpec("conf", "acc", "n")
    confidence = np.array([0.1, 0.3, 0.9, 0.7])
    curves = reliability_curves(spec, confidence, np.array([0.0, 1.0, 1.0, 1.0]),
                                np.array([0, 0, 2, 2]), 3)
    assert curves["n"] == [2.0, 0.0, 2.0]
    assert curves["conf"][0] == pytest.approx(0.2) and curves["conf"][2] == pytest.approx(0.8)
    assert curves["acc"][0] == 0.5 and curves["acc"][2] == 1.0
    assert np.isnan(curves["conf"][1]) and np.isnan(curves["acc"][1])
