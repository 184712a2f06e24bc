"""Each member's metrics and curves in both unlearning suites, from its unlearning
trajectory (every epoch's parameters, recomputed by the judge): TOFU's forget quality and
model utility, MUSE's memorisation, knowledge and privacy leakage, each against the
member's target and retain models, the relearning attack, and the trajectories. The
target's, retain models' and replicas' evaluations are computed once per process, and a
trajectory point whose parameters are bit for bit the previous one's (the target row, a
frozen diverged member) reuses that evaluation: the same inputs give the same numbers."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from harness.contract.memo import once
from suites.unlearning import evaluate as ev
from suites.unlearning import metrics as mt
from suites.unlearning import quantize
from suites.unlearning.spec import QUANT_HEADLINE, RECOVERY_FLOOR, UTILITY_FLOOR

if TYPE_CHECKING:
    from suites.unlearning.pipeline import Private


def memo(p: Private, what: str, i: int | None, compute: Callable[[], Any]) -> Any:
    """``compute()`` for the target or retain model of member ``i`` (``None``: a model the
    scope names, a replica), once per fixture entry and evaluation setting in a run: every
    objective's cells start from the same models (:func:`harness.contract.memo.once`)."""
    return once(json.dumps(["unlearning-evaluation", p.scope, what,
                            None if i is None else p.fixtures[i]], sort_keys=True), compute)


def tofu_member(model: nn.Module, p: Private, i: int, trajectory: list[dict[str, Tensor]],
                s: Mapping[str, Any], notes: dict[str, Any] | None = None
                ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """``notes`` (the cell's info) gets ``withheld``: the ratios left out and why
    (``RECOVERY_FLOOR``, ``UTILITY_FLOOR``)."""
    withheld = ({} if notes is None else notes).setdefault("withheld", {})
    sp = p.splits
    target, r_target = memo(p, "target", i, lambda: ev.tofu(model, p.targets[i], sp))
    retain, r_retain = memo(p, "retain", i, lambda: ev.tofu(model, p.retain[i], sp))
    points = _evaluated([p.targets[i], *trajectory], (target, r_target),
                        lambda point, last: ev.tofu(model, point, sp,
                                                    trajectory_point=not last))
    final, r_final = points[-1]
    metrics = dict(final)
    fq, ks = mt.forget_quality(r_final, r_retain)
    metrics |= {"forget_quality": fq, "log_forget_quality": float(np.log10(max(fq, 1e-300))),
                "ks_statistic": ks, "target_utility": target["model_utility"],
                "retain_model_utility": retain["model_utility"]}
    if target["model_utility"] >= UTILITY_FLOOR:
        metrics["utility_retained"] = metrics["model_utility"] / target["model_utility"]
    else:
        withheld["utility_retained"] = (f"the target's model utility "
                                        f"{target['model_utility']:.3g} is under the floor "
                                        f"{UTILITY_FLOOR}: a ratio over it is noise")
    metrics["score"] = ev.tofu_score(metrics["model_utility"], target["model_utility"], fq)
    if p.replicas:  # their forget truth ratios are all the KS test needs
        fqs = [mt.forget_quality(memo(p, f"replica {k}", None, lambda r=r: ev.truth_ratios(
            model, r, sp.forget)), r_retain)[0] for k, r in enumerate(p.replicas)]
        metrics["retain_model_fq"] = float(np.median(fqs))
    # trajectories: epoch 0 is the target; utilities need generated answers
    fq_curve, mu_curve, prob_curve = [], [], []
    for m, r in points:
        fq_curve.append(float(np.log10(max(mt.forget_quality(r, r_retain)[0], 1e-300))))
        mu_curve.append(m["model_utility"])
        prob_curve.append(m["forget_prob"])
    metrics |= _relearning(model, p, i, trajectory[-1], s, ev.held_back_prob,
                           ("held_back_prob", "relearn_forget_prob"), withheld)

    def rounded(params: dict[str, Tensor], utility: bool) -> dict[str, float]:
        if utility:  # the forget numbers are part of a trajectory point's
            m, r = ev.tofu(model, params, sp, trajectory_point=True)
        else:
            f, r = ev.forget_scores(model, params, sp)
            m = {"forget_prob": float(mt.probability(f.normalized))}
        return {"forget_prob": m["forget_prob"],
                "forget_truth_ratio": float(mt.truth_ratio_forget(r)),
                "log_forget_quality": float(np.log10(max(mt.forget_quality(r, r_retain)[0],
                                                         1e-300))),
                **({"model_utility": m["model_utility"]} if utility else {})}

    quantized, stages = _quantization(
        model, p, i, trajectory[-1], s, rounded,
        ("forget_prob", lambda params: ev.forget_prob(model, params, sp)), ev.held_back_prob,
        (final["forget_prob"], target["forget_prob"]), withheld)
    metrics |= quantized
    curves = {"epochs": [float(e) for e in range(len(trajectory) + 1)],
              "fq_trajectory": fq_curve, "mu_trajectory": mu_curve,
              "forget_prob_trajectory": prob_curve,
              "held_back_under_attack": [metrics["held_back_prob"],
                                         metrics["relearn_forget_prob"], *stages]}
    return metrics, curves


def muse_member(model: nn.Module, p: Private, i: int, trajectory: list[dict[str, Tensor]],
                s: Mapping[str, Any], notes: dict[str, Any] | None = None
                ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """``notes`` (the cell's info) gets ``withheld`` (ratios left out, and why) and
    ``privleak_worst_attack``."""
    notes = {} if notes is None else notes
    withheld = notes.setdefault("withheld", {})
    sp = p.splits
    reference = None
    if p.replicas:  # the reference attack's model: a retain replica, never on the forget set
        reference = memo(p, "mia reference", None, lambda: tuple(
            ev.token_logprobs(model, p.replicas[0], x) for x in (sp.mia_forget,
                                                                  sp.mia_holdout)))
    target = memo(p, "target", i, lambda: ev.muse(model, p.targets[i], sp,
                                                  reference=reference))
    retain = memo(p, "retain", i, lambda: ev.muse(model, p.retain[i], sp,
                                                  reference=reference))
    curve = _evaluated([p.targets[i], *trajectory], target,
                       lambda point, last: ev.muse(model, point, sp, trajectory_point=not last,
                                                   reference=reference))
    final = dict(curve[-1])
    metrics = {k: final[k] for k in ("verbmem_forget", "knowmem_forget", "knowmem_retain")}
    leaks = {attack: mt.privleak(final[key], retain[key]) for attack in mt.MIA_ATTACKS
             if (key := "auc" if attack == "min_k" else f"auc_{attack}") in final}
    metrics["privleak"] = leaks.pop("min_k")  # MUSE's own attack: the headline's
    metrics |= {f"privleak_{attack}": value for attack, value in leaks.items()}
    notes["privleak_worst_attack"], metrics["privleak_worst"] = mt.worst_privleak(
        {"min_k": metrics["privleak"], **leaks})
    metrics["score"] = ev.muse_score(final, target, retain)
    metrics |= {"target_verbmem": target["verbmem_forget"],
                "target_knowmem_forget": target["knowmem_forget"],
                "retain_model_knowmem_forget": retain["knowmem_forget"],
                "target_privleak": mt.privleak(target["auc"], retain["auc"])}
    metrics |= _relearning(model, p, i, trajectory[-1], s, ev.held_back_knowmem,
                           ("held_back_knowmem", "relearn_knowmem_forget"), withheld)
    quantized, stages = _quantization(
        model, p, i, trajectory[-1], s,
        lambda params, utility: {"verbmem_forget": ev.verbmem(model, params, sp),
                                 "knowmem_forget": ev.knowmem(model, params, sp, sp.forget),
                                 **({"knowmem_retain": ev.knowmem(model, params, sp, sp.retain)}
                                    if utility else {})},
        ("knowmem_forget", lambda params: ev.knowmem(model, params, sp, sp.forget)),
        ev.held_back_knowmem, (final["knowmem_forget"], target["knowmem_forget"]), withheld)
    metrics |= quantized
    curves = {"epochs": [float(e) for e in range(len(curve))],
              "verbmem_trajectory": [c["verbmem_forget"] for c in curve],
              "knowmem_forget_trajectory": [c["knowmem_forget"] for c in curve],
              "knowmem_retain_trajectory": [c["knowmem_retain"] for c in curve],
              "held_back_under_attack": [metrics["held_back_knowmem"],
                                         metrics["relearn_knowmem_forget"], *stages]}
    return metrics, curves


def _relearning(model: nn.Module, p: Private, i: int, unlearned: dict[str, Tensor],
                s: Mapping[str, Any], measure: Callable[..., float],
                names: tuple[str, str], withheld: dict[str, str]) -> dict[str, float]:
    """The relearning attack from the unlearned model: ``measure`` (what the held-back
    forget questions score) before and after it, and the share of the way back to the
    target's score it recovered: withheld, with the reason, when unlearning lowered that
    score by less than the suite's ``RECOVERY_FLOOR`` (a share of almost nothing)."""
    sp = p.splits
    attacked = ev.relearn(model, unlearned, sp.relearn, steps=int(s["relearn_steps"]),
                          lr=float(s["relearn_lr"]))
    at_target = memo(p, "target-held-back", i, lambda: measure(model, p.targets[i], sp))
    before = at_target if _same(unlearned, p.targets[i]) else measure(model, unlearned, sp)
    after = measure(model, attacked, sp)
    out = {names[0]: before, names[1]: after}
    floor = RECOVERY_FLOOR[str(s["benchmark"])]
    if at_target - before >= floor:
        out["relearn_recovery"] = (after - before) / (at_target - before)
    elif not _same(unlearned, p.targets[i]):  # the target row has nothing to recover
        withheld["relearn_recovery"] = (f"unlearning lowered the held-back score by "
                                        f"{at_target - before:.3g}, under the floor {floor}: "
                                        f"a share of that drop is noise")
    return out


def _quantization(model: nn.Module, p: Private, i: int, unlearned: dict[str, Tensor],
                  s: Mapping[str, Any],
                  measure: Callable[[dict[str, Tensor], bool], dict[str, float]],
                  anchor: tuple[str, Callable[[dict[str, Tensor]], float]],
                  held_back: Callable[..., float], levels: tuple[float, float],
                  withheld: dict[str, str]) -> tuple[dict[str, float], list[float]]:
    """The quantization attack (:mod:`suites.unlearning.quantize`): ``measure`` (the suite's
    forget numbers, and its utility where the scheme says) of the unlearned model after
    each rounding, the retain model's ``anchor`` number after each, and ``quant_recovery``,
    the share of the way from the unlearned model's ``anchor`` back to the target's
    (``levels``) that 4-bit
    rounding per channel brings (withheld under the suite's ``RECOVERY_FLOOR``, as
    relearning's); and per rounding the ``held_back`` number (the relearning attack's
    measure, on the forget questions it does not train on), for the robustness curve. The
    target row's roundings are computed once per seed in a run."""
    name, number = anchor
    same = _same(unlearned, p.targets[i])
    out: dict[str, float] = {}
    stages: list[float] = []
    for scheme in quantize.schemes(int(s["quant_group"])):
        def attacked(sc: quantize.Scheme = scheme) -> tuple[dict[str, float], float]:
            rounded = quantize.quantized(model, unlearned, sc)
            return measure(rounded, sc.utility), held_back(model, rounded, p.splits)

        values, held = memo(p, f"target {scheme.name}", i, attacked) if same else attacked()
        out |= {f"{scheme.name}_{k}": v for k, v in values.items()}
        stages.append(held)
        out[f"retain_model_{scheme.name}_{name}"] = memo(
            p, f"retain {scheme.name} {name}", i,
            lambda sc=scheme: number(quantize.quantized(model, p.retain[i], sc)))
    before, at_target = levels
    floor = RECOVERY_FLOOR[str(s["benchmark"])]
    if at_target - before >= floor:
        out["quant_recovery"] = (out[f"{QUANT_HEADLINE}_{name}"] - before) / (at_target - before)
    elif not same:  # the target row has nothing to recover
        withheld["quant_recovery"] = (f"unlearning lowered {name} by {at_target - before:.3g},"
                                      f" under the floor {floor}: a share of that drop is "
                                      f"noise")
    return out, stages


def _evaluated(points: list[dict[str, Tensor]], first: Any,
               evaluate: Callable[[dict[str, Tensor], bool], Any]) -> list[Any]:
    """Each trajectory point's evaluation: ``first`` that of ``points[0]`` (the target's,
    complete), ``evaluate(point, last)`` the others' (complete for the last, what the
    curves show before it). A point bit for bit equal to the one before it reuses that
    one's evaluation, the last only a complete one."""
    out, complete = [first], [True]
    for k, (before, point) in enumerate(itertools.pairwise(points), start=1):
        last = k == len(points) - 1
        if _same(point, before) and (complete[-1] or not last):
            out.append(out[-1])
            complete.append(complete[-1])
        else:
            out.append(evaluate(point, last))
            complete.append(last)
    return out


def _same(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> bool:
    """The same parameters bit for bit (``torch.equal`` on the bytes: -0.0 is not 0.0)."""
    return a.keys() == b.keys() and all(
        x.dtype == b[k].dtype and x.shape == b[k].shape and x.device == b[k].device
        and torch.equal(x.reshape(-1).view(torch.uint8), b[k].reshape(-1).view(torch.uint8))
        for k, x in a.items())
