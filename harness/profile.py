"""An objective's profile across suites, for a notebook, a script or the CLI.

:func:`profile` trains what is missing (``harness.api.profile``, ``harness profile``);
:class:`Profile` wraps the payload of :func:`webapp.leaderboard.crosssuite.profile_table`,
the one the objective page shows: per suite the improvement over the reference with its
CI and verdict, the normalized score with its interval and the rank among the suite's
baselines, then the aggregate score over the suites it is scored on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.contract.suite import format_value

if TYPE_CHECKING:
    import pandas
    import plotly.graph_objects


def profile(objective: str | os.PathLike | Callable[..., Any], *,
            suites: Sequence[str] | None = None,
            seeds: int | Iterable[int] = 5, hyperparameters: Mapping[str, Any] | None = None,
            hook: str | None = None, baselines: bool = False, epochs: int | None = None,
            device: str = "cpu", mode: str = "auto", sandbox: bool = False,
            workers: int | None = None, tuned: bool = False,
            progress: str | bool = "auto", say: Callable[[str], None] = print) -> Profile:
    """The objective on every suite it fits (whose hooks it defines or lifts; ``suites``
    narrows them), on each suite's ranked variants: trains the cells not yet stored (its
    own and the suite's reference's, and with ``baselines`` every baseline's too) under one
    progress bar, then returns its :class:`~harness.profile.Profile`: per suite the
    improvement over the reference with its CI and verdict, the normalized score and the
    rank among the suite's stored baselines, and the aggregate score. Interrupted, the
    finished groups stay stored (:class:`Interrupted`). ``epochs``: a shortened smoke
    run of every suite, stored apart (suite version V+eN). ``tuned``: the tuned track
    instead (docs/tuning.md): on the fitting suites with a tuned protocol only, the
    objective and the references tuned with the suite's budget, the aggregate over those
    (the profile names its track)."""
    from harness.api import (
        HarnessError,
        _load_all,
        _Plan,
        _seed_list,
        _suite,
        _train,
        objective_spec,
        setup,
    )
    from harness.contract.registry import all_suites, hooks
    from harness.objectives.loading import load_objective

    spec = objective_spec(objective, hook=hook)
    obj = _load_all([spec], hyperparameters, sandbox)[0]
    fitting = [_suite(s.name, epochs) for s in all_suites() if s.supports(obj.hooks)]
    if suites is not None:
        chosen = [_suite(name, epochs) for name in dict.fromkeys(suites)]
        unfit = [s.name for s in chosen if not s.supports(obj.hooks)]
        if unfit:
            raise HarnessError(f"{obj.name} defines {', '.join(obj.hooks) or 'no hook'}: it "
                               f"does not fit {', '.join(unfit)} (it fits "
                               f"{', '.join(s.name for s in fitting) or 'no suite'})")
        fitting = chosen
    if not fitting:
        raise HarnessError(f"{obj.name} defines {', '.join(obj.hooks) or 'no hook'}, which no "
                           f"suite runs (hooks: {', '.join(hooks())})")
    seed_list = _seed_list(seeds)
    if tuned:
        fitting = _tunable(fitting, obj)
    plans = []
    for suite in fitting:
        names = [suite.reference] + ([b for b in suite.baselines if b != suite.reference]
                                     if baselines else [])
        others = [n for n in names if n != obj.name or obj.origin != "builtin"]
        loaded = [load_objective(n) for n in others]
        if tuned:  # post-hoc calibrators train nothing: the tuned track has nothing to tune
            kept = [i for i, o in enumerate(loaded) if suite.tunes(o.hooks)]
            others, loaded = [others[i] for i in kept], [loaded[i] for i in kept]
        plans.append(_Plan(suite, [spec, *others], [obj, *loaded],
                           suite.ranked_variants, seed_list))
    setup()
    if tuned:
        from harness.tuned_run import check_tunable, tune_plans

        for plan in plans:
            check_tunable(plan.suite, plan.loaded, sandbox, None)
        versions = tune_plans(plans, device=device, mode=mode, sandbox=sandbox,
                              workers=workers, say=say)
        fitting = [s.tuned() for s in fitting]
    else:
        versions = _train(plans, device=device, mode=mode, sandbox=sandbox, workers=workers,
                          progress=progress, say=say)
    from webapp.leaderboard.crosssuite import profile_table

    mine = versions[0][0]
    payload = profile_table(mine.objective.slug, label=mine.label, suites=fitting)
    return Profile({**payload, "track": "tuned" if tuned else "defaults"})


def _tunable(fitting: list[Any], obj: Any) -> list[Any]:
    """The suites of ``fitting`` with a tuned protocol; none is an error that names them."""
    from harness.api import HarnessError
    from harness.contract.registry import all_suites

    tunable = [s for s in fitting if s.tuning is not None]
    if not tunable:
        raise HarnessError(f"{obj.name}: none of {', '.join(s.name for s in fitting)} has a "
                           f"tuned protocol (suites with one: "
                           f"{', '.join(s.name for s in all_suites() if s.tuning)})")
    return tunable


VERDICT_MARKS = {"better": "▲ better", "worse": "▼ worse", "not resolved": "≈ not resolved",
                 "reference": "reference"}


class Profile:
    """One objective on every suite it was profiled on (``payload``: the objective page's
    profile, JSON-ready)."""

    def __init__(self, payload: dict):
        self.payload = payload
        self.label = payload["label"]
        self.aggregate = payload["aggregate"]

    def __repr__(self) -> str:
        names = ", ".join(s["suite"] for s in self.payload["suites"])
        track = " (tuned track)" if self.payload.get("track") == "tuned" else ""
        return f"<Profile {self.label} on {names}{track}>"

    def to_json(self) -> dict:
        return self.payload

    def to_pandas(self) -> pandas.DataFrame:
        """One row per suite: the improvement over its reference (positive = better, in the
        headline's units: a share for percents) with its 95% CI and the verdict, the
        difference the suite's seeds resolve, the normalized score with its interval, the
        rank among the suite's baselines with its interval, and then one row ``aggregate``."""
        import pandas as pd

        records = []
        for s in self.payload["suites"]:
            resolvable = s["resolvable"] or {}
            records.append({
                "suite": s["suite"], "status": s["status"], "reference": s["reference"],
                "headline": s["headline"], "improvement": s["improvement"],
                "ci_low": s["improvement_ci_low"], "ci_high": s["improvement_ci_high"],
                "paired_seeds": s["improvement_seeds"], "verdict": s["verdict"],
                "resolvable": resolvable.get("difference"), "score": s["score"],
                "score_low": s["score_low"], "score_high": s["score_high"],
                "rank": s["rank"], "rank_low": s["rank_low"], "rank_high": s["rank_high"],
                "of": s["of"], "tied_with_best": s["tied"]})
        a = self.aggregate
        if a is not None:
            records.append({"suite": "aggregate", "status": "scored", "score": a["score"],
                            "score_low": a["score_low"], "score_high": a["score_high"]})
        return pd.DataFrame.from_records(records)

    def _repr_html_(self) -> str:
        import html

        return f"<p>{html.escape(repr(self))}</p>" + self.to_pandas().to_html(index=False)

    def figure(self) -> plotly.graph_objects.Figure:
        """One panel per scored suite: the objective's normalized score per seed on each
        ranked variant, against the band of the suite's baselines' means (lowest to highest)
        and the reference's mean."""
        from harness.report import figures

        return figures.figure("across_suites", self.payload)


def rows(payload: dict) -> list[list[str]]:
    """The profile as the CLI prints it: per suite, the cells of one table row."""
    out = []
    for s in payload["suites"]:
        spec = s["headline_spec"]

        def delta(x: float | None, spec: dict = spec) -> str:
            return format_value(x, spec["unit"], spec["decimals"], signed=True)
        if s["status"] == "missing":
            out.append([s["suite"], "no results", "", "", "", ""])
            continue
        better = "—"
        if s["improvement"] is not None:
            better = delta(s["improvement"])
            if s["improvement_ci_low"] is not None:
                better += (f" [{delta(s['improvement_ci_low'])}, "
                           f"{delta(s['improvement_ci_high'])}]")
        resolvable = s["resolvable"]
        resolves = "—" if resolvable is None else format_value(
            resolvable["difference"], spec["unit"], spec["decimals"])
        score = rank = "provisional" if s["status"] == "provisional" else "—"
        if s["score"] is not None:
            score = f"{s['score']:.3f} [{s['score_low']:.3f}, {s['score_high']:.3f}]"
            rank = (f"{'=' if s['tied'] else ''}{s['rank']} of {s['of']} "
                    f"[{s['rank_low']}–{s['rank_high']}]")
        out.append([s["suite"], better, VERDICT_MARKS.get(s["verdict"], "—"), resolves,
                    score, rank])
    return out
