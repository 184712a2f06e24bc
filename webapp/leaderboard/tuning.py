"""What the tuned track shows beside its tables (the CLI after ``harness run --tuned``,
``Results.tuning()``, the suite page's tuned track): per objective and variant, the trial
chosen, the expected best validation score at each budget (:mod:`harness.report.budget`),
the headline at the objective's defaults and tuned (same final seeds, so the tuning gain is
a paired difference with its interval), and every trial's settings with its validation
scores (a sensitivity plot's points)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from harness.contract.suite import Suite


def tuning_report(tuned: Suite, versions: Iterable[Any], variants: Iterable[str]
                  ) -> dict[str, list[dict[str, Any]]]:
    """Per variant, one row per objective version that has tuned cells on ``tuned`` (a
    ``V+tunedK`` suite): ``objective``, ``chosen`` (the trial record), ``trials`` (each
    with its settings, hyperparameters and mean validation score, None where a seed
    failed), ``budget`` (the expected best at n = 1 … k), ``defaults`` and ``tuned`` (mean
    and 95% CI of the headline), ``gain`` (tuned − defaults, paired over seeds)."""
    from harness.contract.registry import suite_at
    from harness.report.budget import expected_best
    from harness.report.stats import compare_paired, summarize
    from harness.storage.models import Cell
    from harness.storage.store import metrics_of

    base = tuned.version.rsplit("+tuned", 1)[0]
    defaults = suite_at(tuned.name, base)
    t = tuned.tuning
    metric = t.metric or tuned.headline
    higher = tuned.metric(tuned.headline).higher_is_better
    out: dict[str, list[dict[str, Any]]] = {}
    for variant in variants:
        rows = []
        for version in versions:
            cells = Cell.objects.filter(version=version, suite=tuned.name, variant=variant,
                                        suite_version__startswith=tuned.version)
            cells = list(cells.values_list("id", "suite_version", "seed", "status",
                                           "environment"))
            if not cells:
                continue
            scores = metrics_of(c[0] for c in cells)
            final = {c[2]: scores[c[0]].get(tuned.headline) for c in cells
                     if c[1] == tuned.version and c[3] == "ok"}
            chosen = next((c[4].get("tuned") for c in cells if c[1] == tuned.version), None)
            trials = _trials(cells, scores, tuned.version, metric)
            budget = _budget(expected_best, trials, tuned.metric(metric).higher_is_better)
            base_cells = Cell.objects.filter(version=version, suite=tuned.name,
                                             variant=variant, suite_version=defaults.version,
                                             status="ok")
            base_scores = metrics_of(base_cells.values_list("id", flat=True))
            default = {s: base_scores[i].get(tuned.headline)
                       for i, s in base_cells.values_list("id", "seed")}
            paired = sorted(s for s in final if default.get(s) is not None
                            and final[s] is not None)
            # the defaults over the same seeds as the tuned row: defaults + gain = tuned
            default = {s: default[s] for s in paired}
            gain = None
            if len(paired) >= 2:
                c = compare_paired([final[s] for s in paired], [default[s] for s in paired],
                                   higher_is_better=higher, min_seeds=tuned.min_seeds)
                gain = {"mean": c.mean_diff, "ci_low": c.diff_ci_low,
                        "ci_high": c.diff_ci_high, "p": c.p_value, "seeds": len(paired)}
            rows.append({"objective": version.label, "chosen": chosen, "trials": trials,
                         "selection_metric": metric, "budget": budget,
                         "tuned": _summary(summarize, final.values(), tuned.min_seeds),
                         "defaults": _summary(summarize, default.values(), tuned.min_seeds),
                         "gain": gain})
        out[variant] = rows
    return out


def _trials(cells, scores, final_version: str, metric: str) -> list[dict[str, Any]]:
    """Each trial's record and mean validation ``metric`` (None unless every seed is ok)."""
    by_trial: dict[int, list] = {}
    for cell in cells:
        record = cell[4].get("tuned") or {}
        if cell[1] != final_version and "trial" in record:
            by_trial.setdefault(int(record["trial"]), []).append(cell)
    out = []
    for index, members in sorted(by_trial.items()):
        values = [scores[c[0]].get(metric) for c in members if c[3] == "ok"]
        ok = len(values) == len(members) and all(v is not None and math.isfinite(v)
                                                 for v in values)
        record = members[0][4]["tuned"]
        out.append({"trial": index, "settings": record.get("settings", {}),
                    "hyperparameters": record.get("hyperparameters", {}),
                    "validation": sum(values) / len(values) if ok else None,
                    "seeds": len(members),
                    # every seed's validation score (None: it diverged or failed)
                    "per_seed": [[c[2], scores[c[0]].get(metric) if c[3] == "ok" else None]
                                 for c in sorted(members, key=lambda c: c[2])]})
    return out


def _budget(expected_best, trials: list[dict[str, Any]], higher: bool) -> dict | None:
    """The expected best over all k trials: a trial that diverged or failed counts as the
    worst one observed (it can never be chosen), so an objective that often fails is not
    scored on its good trials alone."""
    valid = [t["validation"] for t in trials if t["validation"] is not None]
    if not valid:
        return None
    worst = min(valid) if higher else max(valid)
    scores = [worst if t["validation"] is None else t["validation"] for t in trials]
    return expected_best(scores, higher_is_better=higher).to_json()


def _summary(summarize, values, min_seeds: int) -> dict[str, Any] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    s = summarize(values, min_seeds=min_seeds)
    return {"mean": s.mean, "ci_low": s.ci_low, "ci_high": s.ci_high, "seeds": len(values)}


def figure_payloads(tuned: Suite, rows: list[dict[str, Any]], reference: str) -> dict[str, Any]:
    """The payloads of the tuned track's plots for one variant's ``rows`` (of
    :func:`tuning_report`): ``budget`` (every objective's curve) and ``sensitivity``, one
    per tuned setting (every objective) and per hyperparameter of each objective's own."""
    spec = tuned.metric(tuned.tuning.metric or tuned.headline).to_json()

    def entry(r: dict[str, Any]) -> dict[str, Any]:
        return {"label": r["objective"], "is_reference": r["objective"] == reference}

    def points(r: dict[str, Any], part: str, name: str) -> list[list[Any]]:
        return [[t[part][name], score, seed, t["trial"]] for t in r["trials"]
                if name in t[part] for seed, score in t["per_seed"]]

    sensitivity = [{"metric": spec, "dimension": d.name, "log": d.log, "title": d.name,
                    "rows": [{**entry(r), "points": points(r, "settings", d.name)}
                             for r in rows]}
                   for d in tuned.tuning.dimensions() if d.kind != "choice"]
    for r in rows:
        names = sorted({n for t in r["trials"] for n, v in t["hyperparameters"].items()
                        if isinstance(v, int | float) and not isinstance(v, bool)})
        for name in names:
            values = [p[0] for p in points(r, "hyperparameters", name)]
            log = bool(values) and min(values) > 0 and max(values) / min(values) >= 50
            sensitivity.append({"metric": spec, "dimension": name, "log": log,
                                "title": f"{name} ({r['objective']})",
                                "rows": [{**entry(r), "points": points(
                                    r, "hyperparameters", name)}]})
    return {"budget": {"metric": spec, "k": tuned.tuning.k,
                       "rows": [{**entry(r), "budget": r["budget"]} for r in rows]},
            "sensitivity": sensitivity}
