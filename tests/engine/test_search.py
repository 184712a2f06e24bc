"""Search spaces: declared as data, checked where they are declared, sampled by one
scrambled Halton sequence whose columns do not depend on the dimensions after them."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from harness.contract.suite import Anchors, MetricSpec, Suite, SuiteError, Tuning, Variant
from harness.objectives.loading import ObjectiveError, objective_from_module
from harness.objectives.search import SearchSpaceError, parse, sample, trials
from harness.objectives.validate import validate

DEFAULTS = {"q": 0.7, "k": 2, "mode": "a", "alpha": 1.0}


def test_each_kind_of_range_maps_the_unit_interval_as_declared():
    q, k, mode, alpha = parse({"q": {"low": 0.2, "high": 1.0}, "k": {"low": 1, "high": 4},
                               "mode": {"choices": ["a", "b"]},
                               "alpha": {"low": 0.01, "high": 100.0, "log": True}},
                              defaults=DEFAULTS)
    assert (q.kind, k.kind, mode.kind, alpha.kind) == ("float", "int", "choice", "float")
    assert q.value(0.0) == 0.2 and q.value(0.5) == pytest.approx(0.6)
    assert alpha.value(0.5) == pytest.approx(1.0)  # log-uniform: the geometric middle
    # each integer an equal share of [0, 1): 1 below 0.25, 4 from 0.75 on
    assert [k.value(u) for u in (0.0, 0.24, 0.26, 0.5, 0.74, 0.76, 0.999)] == [1, 1, 2, 3, 3,
                                                                              4, 4]
    assert [mode.value(u) for u in (0.1, 0.49, 0.51, 0.99)] == ["a", "a", "b", "b"]


@pytest.mark.parametrize("space, message", [
    ([("q", 1)], "must be a dict"),
    ({"beta": {"low": 0, "high": 1}}, "not a hyperparameter of this objective"),
    ({"q": {"low": 0.1, "hi": 1.0}}, "unknown key"),
    ({"q": {"low": 0.1}}, "needs 'low' and 'high'"),
    ({"q": {"low": 1.0, "high": 0.1}}, "must be below"),
    ({"q": {"low": 0.0, "high": 1.0, "log": True}}, "log range needs 'low' > 0"),
    ({"q": {"low": 0.1, "high": float("inf")}}, "finite numbers"),
    ({"q": {"low": 0.8, "high": 1.0}}, "outside"),
    ({"q": {"low": 0, "high": 1}}, "int bounds for a float"),
    ({"k": {"low": 1.0, "high": 3.0}}, "float bounds for an int"),
    ({"mode": {"low": 0.0, "high": 1.0}}, "declare 'choices'"),
    ({"mode": {"choices": ["b", "c"]}}, "not one of the choices"),
    ({"mode": {"choices": ["a"]}}, "at least two"),
    ({"mode": {"choices": ["a", "a"]}}, "repeats"),
    ({"mode": {"choices": ["a", "b"], "low": 0}}, "stands alone"),
    ({"q": {"low": 0.1, "high": 1.0, "log": "yes"}}, "True or False"),
    ({"q": {"fixed": ""}}, "says why"),
    ({"q": {"fixed": "why", "low": 0.1}}, "'fixed' stands alone"),
])
def test_a_bad_space_is_refused_with_what_is_wrong(space, message):
    with pytest.raises(SearchSpaceError, match=message):
        parse(space, defaults=DEFAULTS)


def test_a_fixed_hyperparameter_is_declared_but_not_tuned():
    dims = parse({"q": {"fixed": "the paper's value"}, "k": {"low": 1, "high": 3}},
                 defaults=DEFAULTS)
    assert [d.name for d in dims] == ["k"]


def test_trials_are_quasi_random_reproducible_and_shared_across_objectives():
    lr = parse({"lr": {"low": 1e-3, "high": 1.0, "log": True}})
    q = parse({"q": {"low": 0.1, "high": 1.0}})
    alone = trials(lr, (), 8, seed=3)
    with_q = trials(lr, q, 8, seed=3)
    assert alone == trials(lr, (), 8, seed=3)  # reproducible
    assert [s for s, _ in alone] == [s for s, _ in with_q]  # CE and GCE get the same lrs
    assert trials(lr, q, 8, seed=4) != with_q
    # low discrepancy: 8 points put one in each eighth of each dimension (a scrambled van
    # der Corput sequence in base 2 is stratified at every power of 2), where 8 iid draws
    # leave a bin empty with probability 1 - 8!/8^8 = 99.8%
    u = np.array([[math.log(s["lr"] / 1e-3) / math.log(1e3), 0.0] for s, _ in with_q])
    assert sorted((u[:, 0] * 8).astype(int).tolist()) == list(range(8))
    assert all(0.1 <= h["q"] <= 1.0 for _, h in with_q)
    assert sample(q, 2, 0) == [{"q": h["q"]} for h in (x for _, x in trials((), q, 2, 0))]
    with pytest.raises(SearchSpaceError, match="at least 1 trial"):
        sample(q, 0, 0)


def _module(source: str):
    module = types.ModuleType("spaced")
    exec(compile(source, "<spaced>", "exec"), module.__dict__)
    return objective_from_module(module, source, name="spaced", origin="file")


LOSS = '''
import torch
SEARCH_SPACE = {SPACE}
def classification_loss(logits, targets, *, q: float = 0.7):
    p = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1).clamp_min(1e-7)
    return (1 - p ** q) / q
'''


def test_an_objective_carries_its_checked_space():
    o = _module(LOSS.replace("{SPACE}", '{"q": {"low": 0.1, "high": 1.0}}'))
    assert [d.name for d in o.dimensions] == ["q"]
    with pytest.raises(ObjectiveError, match="outside") as caught:
        _module(LOSS.replace("{SPACE}", '{"q": {"low": 0.8, "high": 1.0}}'))
    assert caught.value.code == "search-space"


def test_the_validator_smoke_tests_each_end_of_a_range(tmp_path):
    path = tmp_path / "spaced.py"
    path.write_text(LOSS.replace("{SPACE}", '{"q": {"low": 0.0, "high": 1.0}}'))
    report = validate(str(path))  # q = 0 divides by zero: a tuner would train there
    assert not report.ok
    assert any(p.code == "search-space" and "at q=0.0" in p.message for p in report.problems)
    path.write_text(LOSS.replace("{SPACE}", '{"q": {"low": 0.1, "high": 1.0}}'))
    assert validate(str(path)).ok
    path.write_text(LOSS.replace("SEARCH_SPACE = {SPACE}\n", ""))
    report = validate(str(path))  # no space: fine, but said
    assert report.ok and [p.severity for p in report.problems] == ["warning"]


def _suite(tuning: Tuning) -> Suite:
    return Suite(name="s", version="1", description="d", hooks=("classification_loss",),
                 headline="acc", metrics=(MetricSpec("acc", "accuracy"),),
                 anchors={"acc": Anchors(0.0, 1.0)}, variants=(Variant("v", {}, "v"),),
                 pipeline="x:Y", baselines=("ce",), settings={"lr": 0.1, "momentum": 0.9},
                 tuning=tuning)


@pytest.mark.parametrize("space, k, message", [
    ({"momentum": {"low": 0.5, "high": 0.99}}, 8, "learning rate"),
    ({"lr": {"low": 0.2, "high": 1.0}}, 8, "outside"),
    ({"lr": {"low": 0.01, "high": 1.0}, "warmup": {"low": 0.0, "high": 1.0}}, 8,
     "not one of the suite's settings"),
    ({"lr": {"low": 0.01, "high": 1.0}}, 1, "at least 2 trials"),
])
def test_a_suite_declares_a_tuned_protocol_every_objective_can_run(space, k, message):
    _suite(Tuning({"lr": {"low": 0.01, "high": 1.0}}, k=8, selection="best validation"))
    with pytest.raises(SuiteError, match=message):
        _suite(Tuning(space, k=k, selection="best validation"))
