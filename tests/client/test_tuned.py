"""The tuned protocol end to end (harness.runner.tuning, harness.tuned_run): every objective
gets the same trials of the suite's settings, each trial is chosen on a validation split
drawn from the training data, and the chosen one is stored apart from the defaults with the
trial it ran. A 1-epoch run on the test database (seconds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import api
from harness.contract.registry import all_suites, get_suite, suite_at
from harness.contract.suite import CellResult
from harness.runner.tuning import choose


def _cells(version: str):
    from harness.storage.models import Cell

    return list(Cell.objects.filter(suite="noisy-labels", suite_version=version)
                .prefetch_related("metrics").select_related("version__objective"))


def test_a_tuned_run_tunes_everyone_alike_on_validation_and_stores_it_apart(db):
    notes, again = [], []
    res = api.run("noisy-labels", "mae", variants=["sym-0.4"], seeds=5, epochs=1, tuned=True,
                  workers=1, progress=False, say=notes.append)
    api.run("noisy-labels", "mae", variants=["sym-0.4"], seeds=5, epochs=1, tuned=True,
            workers=1, progress=False, say=again.append)
    assert res.suite.version == "1.0+e1+tuned8" and res.to_json()["track"] == "tuned at k=8"
    rows = res.to_json()["variants"]["sym-0.4"]
    assert {r["objective"] for r in rows} == {"ce", "mae"} and all(r["seeds"] == 5 for r in rows)
    assert not _cells("1.0+e1")  # the defaults' track got nothing
    assert any("tuning 2 (objective, variant) pairs" in n for n in notes)
    assert any("already tuned and stored" in n for n in again)  # a rerun trains nothing
    assert not any(n.startswith("tuning") for n in again)

    suite = suite_at("noisy-labels", "1.0+e1")
    searched = {}
    for t in range(8):
        for cell in _cells(f"1.0+e1+tuned8.t{t}"):
            assert cell.environment["split"] == "validation"
            assert cell.environment["tuned"]["trial"] == t
            searched.setdefault(cell.version.objective.slug, {}).setdefault(t, []).append(cell)
    assert set(searched) == {"ce", "mae"}
    for trials in searched.values():
        assert sorted(trials) == list(range(8)) and all(len(c) == 5 for c in trials.values())
    # the shared settings: trial t has the same learning rate and weight decay for ce and mae
    lr = {slug: [suite.trial(t).settings["lr"] for t in range(8)] for slug in searched}
    assert lr["ce"] == lr["mae"] and len(set(lr["ce"])) == 8
    for slug, trials in searched.items():
        as_results = {t: [CellResult("sym-0.4", c.seed, c.status,
                                     {m.name: m.value for m in c.metrics.all()})
                          for c in cells] for t, cells in trials.items()}
        chosen = choose(suite, as_results)
        final = [c for c in _cells("1.0+e1+tuned8") if c.version.objective.slug == slug]
        assert len(final) == 5
        assert {c.environment["tuned"]["trial"] for c in final} == {chosen}  # what val chose
        assert final[0].environment["tuned"]["settings"]["lr"] == pytest.approx(
            lr[slug][chosen])


def test_selection_is_the_best_mean_with_every_seed_ok():
    suite = get_suite("calibration")  # chosen by NLL: lower is better

    def cells(*nll, status="ok"):
        return [CellResult("v", s, status, {"nll": x}) for s, x in enumerate(nll)]

    assert choose(suite, {0: cells(1.0, 1.2), 1: cells(0.9, 1.1), 2: cells(0.9, 1.1)}) == 1
    # a trial with a failed seed is never chosen, however good the others
    failed = {0: cells(1.0, 1.0), 1: [*cells(0.1), CellResult("v", 1, "diverged", {})]}
    assert choose(suite, failed) == 0
    assert choose(suite, {0: cells(math.nan, 1.0)}) is None
    assert choose(get_suite("noisy-labels"), {
        0: [CellResult("v", 0, "ok", {"test_acc": 0.5})],
        1: [CellResult("v", 0, "ok", {"test_acc": 0.6})]}) == 1


def test_the_search_never_sees_the_test_set():
    from harness.contract.registry import pipeline
    from harness.contract.seeding import validation_rows
    from suites.noisy_labels.pipeline import load_dataset, noisy_labels

    suite = get_suite("noisy-labels")
    variant = suite.variant("sym-0.4")
    data = load_dataset("digits", None, False)
    [job] = pipeline(suite).prepare(suite.trial(None), [variant], [1000, 1001])
    part = job.private
    kept, held = validation_rows(len(data.y_train), 0.1)
    assert len(part.y_test) == len(held) == 100 and len(part.y_train) == len(kept) == 900
    # the validation rows are training rows taken out of training, none of the test set
    assert np.array_equal(part.x_test, data.x_train[held])
    assert np.array_equal(job.inputs["x_train"], data.x_train[kept])
    assert not {r.tobytes() for r in part.x_test} & {r.tobytes() for r in data.x_test}
    assert "x_test" not in job.inputs and np.array_equal(job.inputs["x_eval"], part.x_test)
    # a member's labels are its default run's noisy labels on the kept rows, row for row
    assert np.array_equal(job.inputs["labels"][1], noisy_labels(data, variant, 1001)[kept])
    # the validation labels: as noisy as the rest (40%), one draw, the same every time
    assert 0.25 < (part.y_test != data.y_train[held]).mean() < 0.55
    [again] = pipeline(suite).prepare(suite.trial(None), [variant], [1000, 1001])
    assert np.array_equal(part.y_test, again.private.y_test)


def test_certifieds_search_validates_on_training_rows_with_their_own_labels():
    from harness.contract.registry import pipeline
    from harness.contract.seeding import validation_rows
    from suites.certified.data import load_dataset

    suite = get_suite("certified")
    data = load_dataset("digits", None, False)
    [job] = pipeline(suite).prepare(suite.trial(None), [suite.variant("eps-0.1")], [1000])
    kept, held = validation_rows(len(data.y_train), 0.1)
    assert np.array_equal(job.private.x_test, data.x_train[held])
    assert np.array_equal(job.private.y_test, data.y_train[held])  # certified: no label noise
    assert np.array_equal(job.inputs["x_train"], data.x_train[kept])
    assert np.array_equal(job.inputs["x_eval"], data.x_train[held])
    [default] = pipeline(suite).prepare(suite, [suite.variant("eps-0.1")], [0])
    assert np.array_equal(default.private.x_test, data.x_test)  # the default run: untouched
    # the lifted classification losses (the reference ce among them) are tuned here too
    from harness.objectives.loading import load_objective
    from harness.tuned_run import check_tunable

    check_tunable(suite, [load_objective("ce"), load_objective("ibp")], False, None)


@pytest.mark.parametrize("version, message", [
    ("1.0+tuned4", "no longer available"), ("1.0+tuned8.t8", "trial 8 of a budget of 8"),
    ("1.0+tuned", "no longer available")])
def test_a_tuned_version_outside_the_protocol_is_refused(version, message):
    with pytest.raises(LookupError, match=message):
        suite_at("noisy-labels", version)
    assert suite_at("noisy-labels", "1.0+e3+tuned8.t2").settings["epochs"] == 3


def test_a_failed_trial_counts_as_the_worst_in_the_budget_curve():
    from harness.report.budget import expected_best
    from webapp.leaderboard.tuning import _budget

    trials = [{"validation": v} for v in (0.5, None, 0.7, None)]
    curve = _budget(expected_best, trials, higher=True)
    assert curve["budgets"] == [1, 2, 3, 4]  # k = 4, the failed trials included
    assert curve["mean"][0] == pytest.approx((0.5 + 0.5 + 0.7 + 0.5) / 4)
    assert _budget(expected_best, [{"validation": None}], higher=True) is None


def test_a_space_of_non_numbers_is_refused_for_a_tuned_run(db, tmp_path):
    path = tmp_path / "worded.py"
    path.write_text("""
import torch.nn.functional as F
SEARCH_SPACE = {"reduction": {"choices": ["none", "mean"]}}
def classification_loss(logits, targets, *, reduction: str = "none"):
    return F.cross_entropy(logits, targets, reduction=reduction)
""")
    with pytest.raises(api.HarnessError, match="differ in numbers only; reduction"):
        api.run("noisy-labels", str(path), variants=["clean"], epochs=1, tuned=True,
                workers=1, progress=False)


def test_a_sandboxed_tuned_run_binds_each_trials_values_in_its_servers(db, tmp_path):
    """--tuned --sandbox: one sandboxed job per trial, its servers loaded with the trial's
    values (words too: nothing has to batch); a trial whose value breaks the loss diverges
    on validation and is never chosen."""
    path = tmp_path / "scaled.py"
    path.write_text("""
import torch.nn.functional as F
SEARCH_SPACE = {"scale": {"choices": ["one", "nan"]}}
def classification_loss(logits, targets, *, scale: str = "one"):
    return F.cross_entropy(logits, targets, reduction="none") * (1.0 if scale == "one"
                                                                 else float("nan"))
""")
    res = api.run("noisy-labels", str(path), variants=["clean"], seeds=5, epochs=1,
                  tuned=True, sandbox=True, workers=1, progress=False)
    mine = [c for t in range(8) for c in _cells(f"1.0+e1+tuned8.t{t}")
            if c.version.objective.slug == "scaled"]
    by_value = {}
    for c in mine:
        by_value.setdefault(c.environment["tuned"]["hyperparameters"]["scale"], set()).add(
            c.status)
        assert "sandbox" in c.environment  # served from the sandbox
    assert by_value == {"one": {"ok"}, "nan": {"diverged"}}
    final = [c for c in _cells("1.0+e1+tuned8") if c.version.objective.slug == "scaled"]
    assert len(final) == 5 and {c.status for c in final} == {"ok"}
    assert {c.environment["tuned"]["hyperparameters"]["scale"] for c in final} == {"one"}
    assert "sandbox" in final[0].environment
    assert {r["objective"] for r in res.to_json()["variants"]["clean"]} == {"ce", "scaled"}


def test_a_tuned_profile_scores_the_tuned_tracks_and_names_them(db):
    """``harness profile X --tuned``: the objective and the reference tuned on the fitting
    suites with a tuned protocol, the aggregate over those, the track named."""
    p = api.profile("gce", suites=["noisy-labels"], seeds=5, epochs=1, tuned=True,
                    workers=1, progress=False, say=lambda _: None)
    assert p.payload["track"] == "tuned" and "(tuned track)" in repr(p)
    [entry] = p.payload["suites"]
    assert entry["suite"] == "noisy-labels" and entry["status"] == "scored"
    assert p.aggregate is not None and p.aggregate["suites"] == ["noisy-labels"]
    finals = _cells("1.0+e1+tuned8")
    assert {c.version.objective.slug for c in finals} == {"ce", "gce"}
    assert {c.variant for c in finals} == set(get_suite("noisy-labels").ranked_variants)
    assert not _cells("1.0+e1")  # nothing on the defaults' track


@pytest.mark.parametrize("name", [s.name for s in all_suites() if s.tuning is not None])
def test_every_tunable_suite_trains_each_member_with_its_trials_values(name):
    """A suite whose trainer dropped ``plan["per_member"]`` would train every trial alike
    (certified did: 8 trials, one validation score). Three members of one seed: a second
    learning rate, and a second value of the objective's own hyperparameter, each change
    the trained weights (tta: the adapted model's predictions along the stream)."""
    import torch

    from harness.contract.outputs import PARAM
    from harness.contract.registry import pipeline
    from harness.objectives.loading import load_objective
    from harness.runner.tuning import Trial, repeated

    objective, knob, (a, b), (lr, lr2) = {
        "tta": ("pseudo_label", "threshold", (0.9, 0.5), (5e-3, 1e-4)),
        "unlearning-tofu": ("grad_diff", "alpha", (1.0, 5.0), (1e-3, 1e-4)),
        "unlearning-muse": ("grad_diff", "alpha", (1.0, 5.0), (1e-3, 1e-4)),
    }.get(name, ("gce", "q", (0.7, 0.2), (0.05, 0.002)))
    suite = get_suite(name).shortened(1)
    if name.startswith("unlearning"):  # the suite tests' 2-epoch fixtures, built once
        from suites.unlearning.tests.test_unlearning_suite import short

        suite = short(name).shortened(1)
    steps, searching = pipeline(suite), suite.trial(None)
    # seed 0: the fixture models (tta, unlearning) the suites' own tests build anyway
    [job] = steps.prepare(searching, [suite.variant(suite.ranked_variants[0])], [0])
    trials = [Trial(0, {"lr": lr}, {knob: a}), Trial(1, {"lr": lr2}, {knob: a}),
              Trial(2, {"lr": lr}, {knob: b})]
    job = repeated(job, steps, trials, suite.settings)
    out = steps.train(searching, load_objective(objective), dict(job.inputs), dict(job.plan))
    arrays = {k: v for k, v in out.arrays.items() if k.startswith(PARAM)}
    if not arrays:  # unlearning: each epoch's parameters, the last one's; tta: predictions
        arrays = ({k: v[-1] for k, v in out.arrays.items() if k.startswith("params.")}
                  or {"probs": out.arrays["probs"]})
    weights = torch.cat([torch.as_tensor(v).flatten(1) for _, v in sorted(arrays.items())], 1)
    assert weights.shape[0] == 3
    assert not torch.equal(weights[0], weights[1])  # the learning rate reached the optimizer
    assert not torch.equal(weights[0], weights[2])  # the knob reached the loss


def test_an_interrupted_tuned_run_keeps_the_pairs_that_ended(db, monkeypatch):
    from harness import tuned_run

    real, calls = tuned_run.tune_one, []

    def second_interrupted(group, options):  # Ctrl-C while the second pair trains
        calls.append(group.objective)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(group, options)

    monkeypatch.setattr(tuned_run, "tune_one", second_interrupted)
    notes = []
    with pytest.raises(api.Interrupted):
        api.run("noisy-labels", "mae", variants=["sym-0.4"], seeds=5, epochs=1, tuned=True,
                workers=1, progress=False, say=notes.append)
    finals = _cells("1.0+e1+tuned8")
    assert {c.version.objective.slug for c in finals} == {"ce"} and len(finals) == 5
    assert len(_cells("1.0+e1+tuned8.t0")) == 5  # its trials too
    assert any(n.startswith("interrupted: the pairs already tuned are stored") for n in notes)
