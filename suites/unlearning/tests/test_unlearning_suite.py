"""Both unlearning suites end to end on shortened fixtures (models trained for 2 epochs, 2
unlearning epochs): the reference row is the target itself, trajectories start at it,
cells repeat exactly, the sandbox serves the hook with the in-process numbers, and every
bad input is a typed failure with a clear message."""

from __future__ import annotations

import functools
import textwrap
from dataclasses import replace

import numpy as np
import pytest

from harness.contract.registry import get_suite
from harness.data import fixtures
from harness.objectives.loading import ObjectiveError, load_objective
from harness.objectives.validate import validate
from harness.runner.inprocess import run_cells
from harness.runner.sandboxed import run_cells_sandboxed
from suites.unlearning import evaluate as ev
from suites.unlearning import metrics as mt
from suites.unlearning.fixtures import codec, corpus, model_config, params_of
from suites.unlearning.model import TinyLM
from suites.unlearning.quantize import quantized, schemes
from suites.unlearning.spec import FIXTURE_TRAINING, MODEL, VALIDATION_METRICS

pytestmark = pytest.mark.slow
EPOCHS = 2


def short(name: str):
    """The suite with 2-epoch fixtures, 2 unlearning epochs and one replica: the same code,
    minutes less (the fixtures' config is part of their key, so nothing mixes)."""
    suite = get_suite(name)
    fx = tuple(replace(f, config={**f.config, "epochs": 2}) for f in suite.fixtures)
    return replace(suite, fixtures=fx, settings={**suite.settings, "epochs": EPOCHS,
                                                 "replicas": 1 if suite.settings["replicas"]
                                                 else 0})


TOFU, MUSE = short("unlearning-tofu"), short("unlearning-muse")


def run(suite, objective, variant, seeds=(0,)):
    if isinstance(objective, str):
        objective = load_objective(objective)
    return run_cells(suite, objective, [variant], list(seeds))


@functools.cache
def built_in(suite_name: str, name: str, variant: str, seeds=(0,)):
    """A built-in's cells, run once for every test that reads them (minutes of CI)."""
    return ok(run(TOFU if suite_name == TOFU.name else MUSE, name, variant, seeds))


def ok(results):
    assert all(r.status == "ok" for r in results), [(r.status, r.error) for r in results]
    return results


def module(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


# --- the reference row and the trajectories ------------------------------------------


def test_the_target_row_is_the_target_model_itself():
    (cell,) = built_in(TOFU.name, "target", "forget05")
    target = params_of(fixtures.load(TOFU, "target", 0).arrays)
    retain = params_of(fixtures.load(TOFU, "retain", 0, {"forget": 5}).arrays)
    model = TinyLM(model_config({**MODEL, **FIXTURE_TRAINING}))
    splits = ev.splits("tofu", corpus(0), codec(0), 5, 2, 32)
    expected, r_target = ev.tofu(model, target, splits)
    _, r_retain = ev.tofu(model, retain, splits, generate_answers=False)
    for name, value in expected.items():
        assert cell.metrics[name] == pytest.approx(value, abs=1e-12), name
    fq, ks = mt.forget_quality(r_target, r_retain)
    assert cell.metrics["forget_quality"] == pytest.approx(fq)
    assert cell.metrics["ks_statistic"] == pytest.approx(ks)
    assert cell.metrics["utility_retained"] == 1.0
    assert cell.metrics["score"] == pytest.approx(ev.tofu_score(1.0, 1.0, fq))
    # every epoch is the target: flat trajectories
    assert len(set(cell.curves["mu_trajectory"])) == 1
    assert len(cell.curves["fq_trajectory"]) == EPOCHS + 1
    searched = {m.name for m in VALIDATION_METRICS}  # a tuned search's alone
    assert set(cell.metrics) == {m.name for m in TOFU.metrics} - searched - {
        "relearn_recovery", "quant_recovery"}  # nothing to recover from the target itself
    # the quantization attack: the rounded target and retain models, evaluated here
    for scheme in schemes(TOFU.settings["quant_group"]):
        rounded, _ = ev.tofu(model, quantized(model, target, scheme), splits,
                             trajectory_point=True)
        assert cell.metrics[f"{scheme.name}_forget_prob"] == rounded["forget_prob"]
        assert cell.metrics.get(f"{scheme.name}_model_utility") == (
            rounded["model_utility"] if scheme.utility else None)
        assert cell.metrics[f"retain_model_{scheme.name}_forget_prob"] == ev.forget_prob(
            model, quantized(model, retain, scheme), splits)
    # 8 bits barely move a model; 4 bits move it more
    assert abs(cell.metrics["int8_forget_prob"] - expected["forget_prob"]) < abs(
        cell.metrics["int4_forget_prob"] - expected["forget_prob"])


def test_gradient_ascent_moves_away_from_the_target_and_its_trajectory_starts_there():
    (target,), (ga,) = (built_in(TOFU.name, n, "forget05") for n in ("target", "grad_ascent"))
    assert ga.metrics["forget_prob"] < target.metrics["forget_prob"]
    assert ga.curves["forget_prob_trajectory"][0] == target.metrics["forget_prob"]
    assert ga.curves["mu_trajectory"][0] == target.metrics["model_utility"]
    assert ga.curves["forget_prob_trajectory"][-1] == ga.metrics["forget_prob"]
    assert ga.curves["epochs"] == [0.0, 1.0, 2.0]
    assert len(ga.curves["train_loss"]) == EPOCHS
    assert 0 <= ga.metrics["relearn_forget_prob"] <= 1
    assert ga.info["fixtures"]["target"] == fixtures.load(TOFU, "target", 0).key


def test_a_recovery_share_of_a_drop_under_the_floor_is_withheld_with_the_reason(tmp_path):
    """SatImp's case: unlearning that barely lowers the held-back forget score (here,
    training on the retain set alone) gives a relearning "recovery" over almost nothing,
    which came out −7 to −34. It is withheld, and the cell says why; where the drop clears
    the floor (gradient ascent) the share is reported."""
    from suites.unlearning.spec import RECOVERY_FLOOR

    path = module(tmp_path, "retain_only", """
        def unlearning_loss(forget, retain):
            return -retain.seq_logprobs.mean()
    """)
    (cell,) = ok(run(TOFU, load_objective(str(path)), "forget05"))
    drop = built_in(TOFU.name, "target", "forget05")[0].metrics["held_back_prob"] - \
        cell.metrics["held_back_prob"]
    assert drop < RECOVERY_FLOOR["tofu"] and "relearn_recovery" not in cell.metrics
    assert "under the floor 0.05" in cell.info["withheld"]["relearn_recovery"]
    target = built_in(TOFU.name, "target", "forget05")[0].metrics
    if target["forget_prob"] - cell.metrics["forget_prob"] < RECOVERY_FLOOR["tofu"]:
        assert "under the floor" in cell.info["withheld"]["quant_recovery"]
    (ga,) = built_in(TOFU.name, "grad_ascent", "forget05")
    assert "relearn_recovery" in ga.metrics and "withheld" not in ga.info
    m = ga.metrics  # the share 4-bit rounding brings back of what unlearning took
    assert m["quant_recovery"] == pytest.approx(
        (m["int4_forget_prob"] - m["forget_prob"]) / (target["forget_prob"] - m["forget_prob"]))


def test_cells_repeat_exactly_and_seeds_differ():
    # The same grouping (one seed) again: bit-identical. (A seed trained beside another
    # rounds differently under vmap: issue 14 makes cells independent of their group.)
    (first,) = built_in(TOFU.name, "grad_ascent", "forget05")
    (again,) = ok(run(TOFU, "grad_ascent", "forget05"))
    assert again.metrics == first.metrics and again.curves == first.curves
    pair = built_in(TOFU.name, "npo_rt", "forget05", (0, 1))
    assert pair[0].metrics["forget_prob"] != pair[1].metrics["forget_prob"]


def test_an_epoch_equal_to_the_one_before_reuses_its_evaluation_the_last_a_complete_one():
    # (bench/unlearning_judge.py --smoke checks that the numbers are those of evaluating)
    import torch

    from suites.unlearning.scoring import _evaluated

    calls = []

    def evaluate(point, last):
        calls.append(last)
        return ("complete" if last else "partial", len(calls))

    zeros, ones = {"w": torch.zeros(3)}, {"w": torch.ones(3)}
    points = [zeros, {"w": torch.zeros(3)}, ones, {"w": torch.ones(3)}]
    # epoch 1 is the target again: its evaluation; epoch 2 is new: what the curves need;
    # epoch 3 (the last) equals epoch 2, whose evaluation is not complete: evaluated
    assert _evaluated(points, ("complete", 0), evaluate) == [
        ("complete", 0), ("complete", 0), ("partial", 1), ("complete", 2)]
    assert _evaluated([zeros, zeros, zeros], ("complete", 0), evaluate)[2] == ("complete", 0)
    assert _evaluated([zeros, {"w": -torch.zeros(3)}], ("complete", 0), evaluate)[1] == (
        "complete", 3)  # -0.0 is not 0.0 bit for bit: evaluated


# --- the sandbox ---------------------------------------------------------------------


def test_the_sandbox_serves_the_hook_with_the_in_process_numbers():
    from pathlib import Path

    source = Path("suites/unlearning_tofu/baselines/npo_rt.py").read_text()
    local = built_in(TOFU.name, "npo_rt", "forget05", (0, 1))  # the same code, trusted
    (boxed,) = run_cells_sandboxed(TOFU, source, "my_npo.py", {}, ["forget05"], [0])
    assert boxed.status == "ok", (boxed.status, boxed.error)
    assert boxed.info["sandbox"]["protocol"] == "loss-only"
    assert boxed.info["sandbox"]["served"] == {"unlearning_loss": "graph"}
    for name, value in local[0].metrics.items():
        assert boxed.metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name


def test_an_unlearning_objective_validates_in_the_sandbox():
    """The sandbox reaches the suites' shared package (``Suite.shared_code``) for the
    hook's smoke test, as it reaches each suite's own folder."""
    from pathlib import Path

    from harness.contract import registry
    from harness.sandbox import validate_sandboxed

    assert str(Path("suites/unlearning").resolve()) in registry.readable_paths()
    source = Path("suites/unlearning_tofu/baselines/rmu.py").read_text()
    report = validate_sandboxed(source, "my_rmu.py")
    assert report.ok and report.problems == [], report.format()


# --- bad input -----------------------------------------------------------------------


def test_a_loss_that_turns_non_finite_mid_run_is_diverged_with_its_step(tmp_path):
    path = module(tmp_path, "late_nan", """
        def unlearning_loss(forget, retain, *, progress):
            nll = -forget.token_logprobs.sum() / forget.mask.sum()
            return -nll * (1.0 if progress < 0.5 else float("nan"))
    """)
    (cell,) = run(TOFU, str(path), "forget05")
    steps = -(-100 // 32) * EPOCHS  # forget05: 100 QA in batches of 32
    assert cell.status == "diverged", (cell.status, cell.error)
    assert cell.diverged_step == steps // 2
    assert cell.metrics == {}


def test_a_context_name_that_does_not_exist_is_refused_naming_the_allowed_ones(tmp_path):
    path = module(tmp_path, "bad_context", """
        def unlearning_loss(forget, retain, *, reference_logits):
            return -forget.seq_logprobs.mean()
    """)
    report = validate(str(path))
    assert not report.ok
    text = report.format()
    assert "reference_logits" in text
    for allowed in ("ref_forget", "ref_retain", "idk", "hidden_forget", "control_vector"):
        assert allowed in text, text
    with pytest.raises(ObjectiveError):
        load_objective(str(path))


def test_a_hidden_layer_outside_the_model_is_refused(tmp_path):
    path = module(tmp_path, "bad_layer", """
        MODEL = {"hidden_layer": 7}

        def unlearning_loss(forget, retain, *, hidden_forget):
            return hidden_forget.pow(2).mean()
    """)
    report = validate(str(path))
    assert not report.ok and "hidden_layer" in report.format(), report.format()
    (cell,) = run(TOFU, str(path), "forget05")
    assert (cell.status, cell.reason) == ("failed", "objective")
    assert "MODEL['hidden_layer'] must be a block index 0..1" in cell.error


def test_a_loss_that_exhausts_memory_is_a_memory_failure():
    source = textwrap.dedent("""
        import torch

        def unlearning_loss(forget, retain):
            hog = torch.ones(1 << 36)  # 256 GiB: past any address-space limit
            return -forget.seq_logprobs.mean() + hog.sum() * 0
    """)
    (cell,) = run_cells_sandboxed(TOFU, source, "hog.py", {}, ["forget05"], [0])
    assert cell.status in ("failed", "killed") and cell.reason == "memory", (
        cell.status, cell.reason, cell.error)


# --- MUSE ----------------------------------------------------------------------------


def test_muse_reports_memorisation_knowledge_and_privacy_leakage():
    (target,), (ga,) = (built_in(MUSE.name, n, "forget10") for n in ("target", "grad_ascent"))
    declared = {m.name for m in MUSE.metrics} - {m.name for m in VALIDATION_METRICS}
    assert set(target.metrics) == declared - {"relearn_recovery", "quant_recovery"}
    assert target.metrics["privleak"] == pytest.approx(target.metrics["target_privleak"])
    assert target.metrics["verbmem_forget"] == pytest.approx(target.metrics["target_verbmem"])
    assert target.metrics["score"] == pytest.approx(0.5)
    for cell in (target, ga):
        for name in ("verbmem_forget", "knowmem_forget", "knowmem_retain"):
            assert 0 <= cell.metrics[name] <= 100
    assert ga.curves["knowmem_forget_trajectory"][0] == target.metrics["knowmem_forget"]
    assert ga.metrics["knowmem_forget"] != target.metrics["knowmem_forget"]
    assert np.isfinite(ga.metrics["privleak"])
    # the attack family: each its own PrivLeak, the worst the farthest from 0, named
    for cell in (target, ga):
        family = {"min_k": cell.metrics["privleak"],
                  **{a: cell.metrics[f"privleak_{a}"] for a in
                     ("loss", "zlib", "reference", "min_k_plus_plus")}}
        assert all(np.isfinite(v) for v in family.values())
        worst = max(family, key=lambda a: abs(family[a]))
        assert cell.info["privleak_worst_attack"] == worst
        assert cell.metrics["privleak_worst"] == family[worst]
    assert len({round(v, 6) for v in family.values()}) > 1  # the attacks disagree
    # the quantization attack: the target's own numbers after rounding, recomputed here
    model = TinyLM(model_config({**MODEL, **FIXTURE_TRAINING, "benchmark": "muse"}))
    params = params_of(fixtures.load(MUSE, "target", 0).arrays)
    splits = ev.splits("muse", corpus(0), codec(0), 10, 2, 32)
    rounded = ev.muse(model, quantized(model, params, schemes(32)[1]), splits,
                      trajectory_point=True)
    assert {k: target.metrics[f"int4_{k}"] for k in rounded} == rounded
