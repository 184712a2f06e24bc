"""The tuned protocol on test-time adaptation: trials are chosen on streams of the held-out
corruptions, every trial of one batched search gives the numbers it gives alone (numbers
vmapped, LAME's kernel names in a loop), and the tuned track's final streams leave the
held-out corruptions out, since they chose its settings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.contract.registry import get_suite, pipeline
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from harness.runner.tuning import search, trials_for, tune
from suites.tta import CORRUPTIONS

SUITE = get_suite("tta")
# two trials on two search seeds: what the protocol does, at a test's cost
SMALL = dataclasses.replace(SUITE, tuning=dataclasses.replace(
    SUITE.tuning, k=2, search_seeds=(1000, 1001)))


def _corruptions(suite, seeds):
    (job,) = pipeline(suite).prepare(suite, [suite.variant("iid")], seeds)
    return set(np.unique(job.private.corruption).tolist())


def test_the_search_streams_only_held_out_corruptions_and_the_tuned_track_none():
    held = set(range(len(CORRUPTIONS), len(CORRUPTIONS) + 4))
    assert _corruptions(SMALL.trial(None), [1000]) == held
    assert _corruptions(SMALL.tuned({"lr": 2e-3}), [0]) == set(range(len(CORRUPTIONS)))
    assert _corruptions(SMALL, [0]) == set(range(len(CORRUPTIONS))) | held  # defaults


@pytest.mark.parametrize("name", ["tent", "lame"])
def test_each_trial_of_a_batched_search_gives_the_numbers_it_gives_alone(name):
    objective = load_objective(name)
    trials = trials_for(SMALL, objective)
    seeds = list(SMALL.tuning.search_seeds)
    batched = search(SMALL, objective, "iid", trials)
    for trial in trials:
        alone = run_cells(SMALL.trial(trial.index), load_objective(name, trial.hyperparameters),
                          ["iid"], seeds)
        got = batched[trial.index]
        assert [c.status for c in got] == ["ok"] * len(seeds)
        for a, b in zip(got, alone, strict=True):
            assert a.metrics.keys() == b.metrics.keys() and "heldout_error" not in a.metrics
            np.testing.assert_allclose([a.metrics[k] for k in sorted(a.metrics)],
                                       [b.metrics[k] for k in sorted(b.metrics)], atol=1e-6)
    info = batched[0][0].info
    assert info["members_batched"] == len(trials) * len(seeds)
    if name == "lame":  # its kernel is a name: the trials differ in it, so members loop
        assert len({t.hyperparameters["affinity"] for t in trials}) == 2
        assert "affinity" in info["fallback_reason"]
    else:  # learning rates differ as numbers: still one vmapped batch
        assert info["mode"] == "vmap"


def test_the_reference_tunes_nothing_and_its_tuned_numbers_are_its_defaults():
    tuned = tune("tta", SUITE.version, "source", {}, "continual", [0], {})
    defaults = run_cells(SUITE, load_objective("source"), ["continual"], [0])
    searched = {round(c.metrics["online_error"], 9) for cells in tuned.searched.values()
                for c in cells if c.seed == 1000}
    assert len(tuned.searched) == SUITE.tuning.k and len(searched) == 1  # lr moves nothing
    (final,), (default,) = tuned.final, defaults
    assert final.info["tuned"]["trial"] == tuned.chosen == 0
    assert final.metrics == pytest.approx(default.metrics, abs=1e-9)
