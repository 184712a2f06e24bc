"""Exports of leaderboard tables that researchers paste into papers: tidy CSV and a
booktabs LaTeX table. Pure functions over :func:`webapp.leaderboard.variant_table`
payloads; no queries.

CSV holds plain numbers in the metric's stored unit, and its ``unit`` column says what the
numbers are: ``fraction`` for a metric the pages show in percent (0.982, shown as 98.2%),
with the metric's direction in a column; ``improvement_vs_ref`` is positive when the
objective is better than the reference, whatever the direction. LaTeX shows each metric as
the pages do (percents ×100), says which way is better in the caption, and needs booktabs
only (no amsmath: ``\\mathrm``, not ``\\text``)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from harness.contract.suite import MetricSpec, Suite
from harness.report.tables import worst_variant
from webapp.leaderboard.lookup import with_values

ACROSS = ("across_mean", "across_worst", "across_worst_variant", "across_variants")


def tables_csv(tables: list[dict]) -> str:
    """Tidy CSV: one line per (variant, objective), plain numbers (fractions, not %). With
    several variants, each line also carries its objective's numbers across them (as the
    suite summary): the mean of its per-variant means, the worst one and its variant, and
    how many variants it has a result on."""
    out = io.StringIO()
    secondary = list(dict.fromkeys(m for t in tables for m in t["metrics"][1:]))
    fields = ["suite", "suite_version", "variant", "metric", "better", "unit", "objective",
              "slug", "builtin", "reference", "seeds", "diverged", "failed", "mean", "ci_low",
              "ci_high", "std", "iqm", "tied_with_best", "p_improvement", "p_ci_low",
              "p_ci_high", "improvement_vs_ref", "improvement_ci_low", "improvement_ci_high",
              "distinguishable", "p_value", "p_holm", "rank_low", "rank_high", *secondary]
    across = _across(tables) if len(tables) > 1 else None
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields + list(ACROSS) if across is not None else fields)
    for t in tables:
        for r in t["rows"]:
            extra = [] if across is None else list(across[r["objective"]])
            vs = r["vs_reference"] or {}
            spec = t["headline_spec"]
            writer.writerow(_csv_cell(x) for x in [
                t["suite"], t["suite_version"], t["variant"], spec["name"], spec["better"],
                csv_unit(spec["unit"]), r["objective"], r["slug"],
                r["is_builtin"], r["is_reference"], r["seeds"], r["diverged"], r["failed"],
                r["mean"], r["ci_low"], r["ci_high"], r["std"], r["iqm"], r["tied_with_best"],
                vs.get("prob_improvement"), vs.get("prob_ci_low"), vs.get("prob_ci_high"),
                vs.get("mean_diff"), vs.get("diff_ci_low"), vs.get("diff_ci_high"),
                vs.get("distinguishable"), vs.get("p_value"), vs.get("p_holm"),
                r.get("rank_low"), r.get("rank_high"),
                *(r["secondary"].get(m) for m in secondary)]
                + extra)
    return out.getvalue()


def csv_unit(unit: str) -> str:
    """The unit of the numbers a CSV holds: percents are stored, and written, as fractions."""
    return "fraction" if unit == "percent" else unit


def scores_csv(board: dict, track: str = "defaults") -> str:
    """The home page's ranking as CSV: per objective its rank with the rank's interval and
    tie mark, the cross-suite score with its interval, the suites it is scored on (";"
    between them) and, per suite, its normalized score there (the suite summary's); every
    line names the ``track`` the board is on (scores of two tracks are not comparable)."""
    out = io.StringIO()
    suites = [s["suite"] for s in board["suites"]]
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["track", "rank", "rank_low", "rank_high", "tied", "objective", "slug",
                     "builtin", "score", "score_low", "score_high", "score_n", "scored_on",
                     *(f"normalized_{s}" for s in suites)])
    for r in board["rows"]:
        writer.writerow(_csv_cell(x) for x in [
            track, r["rank"], r["rank_low"], r["rank_high"], r["tied"], r["objective"], r["slug"],
            r["is_builtin"], r["score"], r["score_low"], r["score_high"], r["score_n"],
            ";".join(r["coverage"]),
            *((r["cells"].get(s) or {}).get("normalized") for s in suites)])
    return out.getvalue()


def _across(tables: list[dict]) -> dict[str, tuple]:
    """{objective: (mean, worst, worst variant, variants covered)} over ``tables``."""
    higher = tables[0]["headline_spec"]["higher_is_better"]
    means: dict[str, dict[str, float]] = {}
    for t in tables:
        for r in t["rows"]:
            row = means.setdefault(r["objective"], {})
            if r["seeds"] and r["mean"] is not None:
                row[t["variant"]] = r["mean"]
    out = {}
    for label, m in means.items():
        worst = worst_variant(m, higher) or (None, None)
        out[label] = (sum(m.values()) / len(m) if m else None, worst[1], worst[0], len(m))
    return out


def tables_latex(suite: Suite, tables: list[dict], *, interval: bool = False) -> str:
    """A booktabs table to paste into a paper.

    One variant: a row per objective with mean ± CI (± = half the CI width, or
    ``[low, high]`` with ``interval``), seeds, diverged, P(improvement) over the
    reference and the secondary metrics. Several variants: objectives × variants, headline
    mean ± CI. Best in bold; ⋆ = tied with the best, the pages' ★ (the 95% bootstrap
    rank interval reaches 1; a metric's own short name may carry †). Percent metrics are
    shown in %. No results at all is a :class:`ValueError` (a table without rows is no
    table).
    """
    if not any(r["seeds"] for t in tables for r in t["rows"]):
        raise ValueError(f"no results on {suite.name} yet")
    headline = suite.headline_metric
    cell = _latex_interval if interval else _latex_pm
    ci_word = "[95\\% CI]" if interval else "$\\pm$ half-width of the 95\\% CI"
    unit = " (\\%)" if headline.percent else ""
    note = (f"{_tex(suite.name)} v{_tex(suite.version)}, {_tex(headline.label)}{unit}, "
            f"{headline.better} is better: mean over seeds {ci_word} "
            "(Student-t). \\textbf{Bold}: best; $^{\\star}$: tied with the best (its 95\\% "
            "bootstrap rank interval reaches 1: it could be the best at these seeds).")
    if suite.track != "defaults" and suite.tuning is not None:
        note += (f" Tuned track: every objective, the reference too, given the same "
                 f"{suite.tuning.k} trials of its settings and hyperparameters, chosen on a "
                 "validation split.")
    lines = ["% Objective Harness export; needs \\usepackage{booktabs}", "\\begin{table}[t]",
             "\\centering", "\\small"]
    if len(tables) == 1:
        t = tables[0]
        # the suite's table columns that have a value here (a paper's table, not a dump:
        # the CSV has every metric)
        secondary = [suite.metric(m["name"]) for m in with_values(t["table_specs"], t["rows"])]
        cols = "l" + "r" * (4 + len(secondary))
        head = ["Objective", _tex(headline.short or headline.label), "Seeds", "Div.",
                f"$P(>\\mathrm{{{_tex(t['reference'])}}})$",
                *(_tex(m.short or m.name) for m in secondary)]
        lines += [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(head) + " \\\\",
                  "\\midrule"]
        best = _best_label(t)
        for r in t["rows"]:
            vs = r["vs_reference"]
            pi = "ref." if r["is_reference"] else (
                "--" if not vs or vs["prob_improvement"] is None else
                f"{vs['prob_improvement']:.2f}" + ("" if vs["distinguishable"] else "$^{\\ast}$"))
            lines.append(" & ".join([
                _tex(r["objective"]),
                _latex_mark(cell(r, headline), r, best),
                str(r["seeds"]), str(r["diverged"]), pi,
                *(_latex_number(r["secondary"].get(m.name), m) for m in secondary),
            ]) + " \\\\")
        note += (f" $P(>\\mathrm{{{_tex(t['reference'])}}})$: probability of improvement "
                 "over the reference on paired seeds; $^{\\ast}$: not distinguishable from "
                 "the reference.")
        caption = f"{_tex(t['variant'])}: {note}"
    else:
        labels = list(dict.fromkeys(r["objective"] for t in tables for r in t["rows"]))
        by = {(t["variant"], r["objective"]): r for t in tables for r in t["rows"]}
        bests = {t["variant"]: _best_label(t) for t in tables}
        lines += [f"\\begin{{tabular}}{{l{'r' * len(tables)}}}", "\\toprule",
                  " & ".join(["Objective", *(_tex(t["variant"]) for t in tables)]) + " \\\\",
                  "\\midrule"]
        for label in labels:
            cells = []
            for t in tables:
                r = by.get((t["variant"], label))
                cells.append("--" if r is None or not r["seeds"] else
                             _latex_mark(cell(r, headline), r, bests[t["variant"]]))
            lines.append(" & ".join([_tex(label), *cells]) + " \\\\")
        caption = note
    lines += ["\\bottomrule", "\\end{tabular}", f"\\caption{{{caption}}}", "\\end{table}", ""]
    return "\n".join(lines)


def _csv_cell(x: Any) -> Any:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):  # no value, not "nan"
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    return x


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def _latex_number(x: float | None, spec: MetricSpec) -> str:
    if x is None:
        return "--"
    text = spec.format(x)
    if spec.unit == "pvalue" and "e" in text:  # 1.2e-03 -> $1.2\times10^{-3}$
        mantissa, exponent = text.split("e")
        return f"${mantissa}\\times10^{{{int(exponent)}}}$"
    return text


def _no_interval(r: dict) -> bool:
    """No CI to print: none stored, or NaN (a row below the suite's minimum of seeds)."""
    return any(r[k] is None or not math.isfinite(r[k]) for k in ("ci_low", "ci_high"))


def _latex_pm(r: dict, spec: MetricSpec) -> str:
    mean = _latex_number(r["mean"], spec)
    if _no_interval(r):
        return mean
    return f"{mean} $\\pm$ {_latex_number((r['ci_high'] - r['ci_low']) / 2, spec)}"


def _latex_interval(r: dict, spec: MetricSpec) -> str:
    mean = _latex_number(r["mean"], spec)
    if _no_interval(r):
        return mean
    return (f"{mean} {{\\scriptsize [{_latex_number(r['ci_low'], spec)}, "
            f"{_latex_number(r['ci_high'], spec)}]}}")


def _best_label(t: dict) -> str | None:
    first = next((r for r in t["rows"] if r["seeds"]), None)
    return first["objective"] if first else None


def _latex_mark(text: str, r: dict, best: str | None) -> str:
    if r["objective"] == best:
        return f"\\textbf{{{text}}}"
    if r["tied_with_best"]:
        return f"{text}$^{{\\star}}$"
    return text
