"""The tuned protocol on the unlearning suites: trials train as one batch with their own
learning rates and knobs, and are scored by MUSE's rule on the data an unlearner holds
(the forget and retain sets it trained on), never on the judge's evaluation splits. On the
shortened fixtures of the suite tests, seed 0 standing in for the search seeds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.contract.registry import pipeline
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from harness.runner.tuning import choose, search, trials_for
from suites.unlearning.data import FIELDS, Encoded
from suites.unlearning.lm import score
from suites.unlearning.pipeline import _model
from suites.unlearning.tests.test_unlearning_suite import short

pytestmark = pytest.mark.slow
VALIDATION = {"val_forget", "val_retain", "val_select"}


def _small(name: str):
    suite = short(name)
    return replace(suite, tuning=replace(suite.tuning, k=2, search_seeds=(0,)))


@pytest.mark.parametrize("name", ["unlearning-tofu", "unlearning-muse"])
def test_each_trial_of_a_batched_search_scores_what_it_scores_alone(name):
    suite = _small(name)
    objective = load_objective("grad_diff")
    trials = trials_for(suite, objective)
    variant = suite.ranked_variants[0]
    batched = search(suite, objective, variant, trials)
    for trial in trials:
        (alone,) = run_cells(suite.trial(trial.index),
                             load_objective("grad_diff", trial.hyperparameters), [variant], [0])
        (cell,) = batched[trial.index]
        assert cell.status == "ok" and set(cell.metrics) == VALIDATION  # nothing else judged
        assert cell.metrics == pytest.approx(alone.metrics, abs=1e-6)
    values = [batched[t.index][0].metrics["val_forget"] for t in trials]
    assert values[0] != values[1]  # the trials' learning rates and alphas reached training
    assert choose(suite, batched) in (0, 1)


def test_muse_rule_ranks_every_trial_that_forgot_above_every_one_that_did_not():
    """val_select, recomputed from the forget and retain sets and the retain model."""
    suite = _small("unlearning-tofu")
    steps = pipeline(suite.trial(None))
    (job,) = steps.prepare(suite.trial(None), [suite.variant("forget05")], [0])
    objective = load_objective("grad_ascent")
    trials = trials_for(suite, objective)
    cells = search(suite, objective, "forget05", trials)
    model = _model(job.plan["model"])
    forget = Encoded(*(job.inputs[f"forget.{f}"] for f in FIELDS))
    bar = float(score(model, job.private.retain[0], forget).normalized.mean())
    assert 0 < bar < 1
    for trial in trials:
        m = cells[trial.index][0].metrics
        expected = m["val_retain"] if m["val_forget"] <= bar else bar - m["val_forget"]
        assert m["val_select"] == pytest.approx(expected, abs=1e-9)
        assert np.isfinite(m["val_forget"]) and 0 <= m["val_retain"] <= 1
