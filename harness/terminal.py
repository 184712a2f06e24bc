"""Terminal rendering (rich): the progress bar and the per-variant result tables."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Mapping

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.contract.suite import MetricSpec, Suite
from harness.report.tables import TableRow
from harness.report.textsafe import printable


@contextlib.contextmanager
def progress_bar(total: int, quiet: bool = False) -> Iterator[Callable[[str], Callable]]:
    """Yields ``advance(label)``, which returns the callback a suite calls with cell fractions."""
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=quiet or total == 0,
                  transient=False) as progress:
        task = progress.add_task("cells", total=total)

        def advance(label: str) -> Callable[[float], None]:
            progress.update(task, description=shown(label))
            return lambda cells: progress.advance(task, cells)

        yield advance
        progress.update(task, description="done", completed=total)


def render_tables(suite: Suite, variants: list[str], tables: dict[str, list[TableRow]],
                  columns: Mapping[str, tuple[str, ...]]) -> None:
    """One table per variant (or variant and track: the keys of ``tables``), with the
    ``columns`` of each beside the headline, numbers in each metric's unit; the difference
    with the reference is an improvement (positive = better, whatever the metric's
    direction)."""
    console = Console(width=None if sys.stdout.isatty() else 140)
    head = suite.headline_metric
    unit = " (pp)" if head.percent else ""
    for v in variants:
        secondary = columns[v]
        table = Table(title=f"{suite.name} v{suite.version}{_track(suite)} · {v} · {head.label} "
                            f"({head.better} is better)",
                      title_justify="left", header_style="bold", caption_justify="left")
        table.add_column("objective")
        table.add_column("mean [95% CI]", justify="right")
        table.add_column("IQM", justify="right")
        table.add_column("seeds", justify="right")
        table.add_column("div", justify="right")
        table.add_column(f"P(>{suite.reference})", justify="right")
        table.add_column(f"better than {suite.reference}{unit} [95% CI]", justify="right")
        for m in secondary:
            table.add_column(suite.metric(m).header, justify="right")
        for r in tables[v]:
            table.add_row(*_cells(r, head, [suite.metric(m) for m in secondary]))
        console.print(table)
        found = _resolvable(tables[v])
        if found is not None:
            pp = " pp" if head.percent else ""
            console.print(
                f"{found['seeds']} seeds resolve an improvement over {suite.reference} from "
                f"about {head.format(found['difference'])}{pp} (Holm over {found['compared']}; "
                f"{head.format(found['uncorrected'])}{pp} for one comparison)",
                highlight=False)
    notes = ["★ could be the best: its 95% bootstrap rank interval reaches 1",
             f"~ not resolved from {suite.reference} (paired t-test, Holm-corrected over the "
             f"objectives shown; a CI leaving out 0 can still read ~)",
             f"no CI and no verdict below {suite.min_seeds} seeds; the 95% CIs cover 94–96% "
             f"for normal, mildly skewed or heavy-tailed seeds, about 92% where seeds are "
             f"strongly skewed or some collapse",
             f"P(>{suite.reference}) = probability of improvement over paired seeds",
             f"better than {suite.reference}: mean paired improvement (negative = worse)",
             "div = diverged seeds (excluded from the mean)"]
    shown_columns = dict.fromkeys(m for v in variants for m in columns[v])
    notes += [f"{suite.metric(m).header} = {suite.metric(m).label} "
              f"({suite.metric(m).better} is better)" if suite.metric(m).better != "neither"
              else f"{suite.metric(m).header} = {suite.metric(m).label}" for m in shown_columns]
    console.print("\n".join(notes), highlight=False)


def _resolvable(rows: list[TableRow]) -> dict | None:
    from harness.report.tables import resolvable

    return resolvable([(r.vs_reference.diff_ci_low, r.vs_reference.diff_ci_high,
                        r.vs_reference.n_pairs) for r in rows if r.vs_reference is not None])


def render_profile(payload: dict) -> None:
    """An objective's profile (:mod:`harness.profile`): one row per suite, the aggregate
    below, and what the numbers mean."""
    from harness.profile import rows

    console = Console(width=None if sys.stdout.isatty() else 140)
    label = shown(payload["label"] or payload["slug"])
    track = " — tuned track (every objective tuned with the same budget)" if payload.get(
        "track") == "tuned" else ""
    table = Table(title=f"{label} across suites{track}", title_justify="left",
                  header_style="bold")
    for name, justify in (("suite", "left"), ("better than the reference [95% CI]", "right"),
                          ("verdict", "left"), ("resolves", "right"),
                          ("score [95% CI]", "right"), ("rank among baselines", "right")):
        table.add_column(name, justify=justify)
    for cells in rows(payload):
        table.add_row(*(escape(c) for c in cells))
    console.print(table)
    a = payload["aggregate"]
    if a is None:
        console.print("Score: none yet (no suite has the seeds a score needs)", highlight=False)
    else:
        console.print(f"Score {a['score']:.3f} [{a['score_low']:.3f}, {a['score_high']:.3f}] "
                      f"over {', '.join(a['suites'])} ({a['n']} seed scores)",
                      highlight=False, style="bold")
    notes = [
        "better than the reference: the headline's mean paired improvement over the suite's "
        "ranked variants, positive = better (pp for percents); verdict: paired t-test, "
        "Holm-corrected over the suite's objectives (▲ better, ▼ worse, ≈ not resolved)",
        "resolves: the smallest improvement that test resolves at the suite's seed count and "
        "spread; smaller ones read ≈ even where they are real",
        payload["aggregate_rule"], payload["rank_rule"]]
    if payload["unscored"]:
        notes.append(f"not scored (too few seeds or no results): "
                     f"{', '.join(payload['unscored'])}")
    console.print("\n".join(escape(n) for n in notes), highlight=False, style="dim")


def render_scores(board: dict) -> None:
    """The home page's ranking (``webapp.leaderboard.home_table``): one table per set of
    suites objectives are scored on (they are ranked only within it), each objective with
    its rank, the rank's interval and the score with its interval; provisional ones last."""
    console = Console(width=None if sys.stdout.isatty() else 140)
    groups: dict[tuple[str, ...], list[dict]] = {}
    for r in board["rows"]:
        groups.setdefault(tuple(r["coverage"]) if r["rank"] is not None else (), []).append(r)
    for coverage, rows in groups.items():
        title = (f"Scored on {', '.join(coverage)}" if coverage else
                 "Provisional (not yet the seeds a score needs)")
        table = Table(title=title, title_justify="left", header_style="bold")
        for name, justify in (("rank", "right"), ("objective", "left"),
                              ("score [95% interval]", "right")):
            table.add_column(name, justify=justify)
        for r in rows:
            rank = "–" if r["rank"] is None else (
                f"{'=' if r['tied'] else ''}{r['rank']} of {len(rows)} "
                f"({r['rank_low']}–{r['rank_high']})")
            score = "–" if r["score"] is None else (
                f"{r['score']:.3f} [{r['score_low']:.3f}, {r['score_high']:.3f}]")
            table.add_row(rank, shown(r["objective"]), score)
        console.print(table)
    console.print(escape(f"Score: {board['rank_method']}."), highlight=False, style="dim")


def shown(text: str) -> str:
    """Text from outside (an objective's name or label) as rich prints it literally: control
    characters escaped (:func:`harness.report.textsafe.printable`), no markup interpreted."""
    return escape(printable(text))


def _cells(r: TableRow, head: MetricSpec, secondary: list[MetricSpec]) -> list[str]:
    s = r.summary
    name = ("★ " if r.tied_with_best else "  ") + shown(r.objective)
    if r.is_reference:
        name += " (ref)"
    mean = f"{head.format(s.mean)} [{head.format(s.ci_low)}, {head.format(s.ci_high)}]" \
        if s.n else "—"
    prob, delta = "", ""
    if r.vs_reference is not None:
        c = r.vs_reference
        mark = "" if c.distinguishable else "~"
        prob = f"{mark}{c.prob_improvement:.2f}"
        delta = f"{head.format_delta(c.mean_diff)} [{head.format_delta(c.diff_ci_low)}, " \
                f"{head.format_delta(c.diff_ci_high)}]"
    failed = f" ({r.failed} failed)" if r.failed else ""
    return [name, mean, head.format(s.iqm) if s.n else "—", f"{r.seeds}{failed}",
            str(r.diverged), prob, delta] + [m.format(r.secondary.get(m.name, math.nan))
                                             for m in secondary]


def render_factorial(suite: Suite, report: list[tuple]) -> None:
    """(objective, variant, cells, Decomposition or None) rows: each seed stream's share of
    the headline's variance between seeds, with its 95% interval."""
    from harness.report.variance import INTERACTIONS

    head = suite.headline_metric
    console = Console(width=None if sys.stdout.isatty() else 160)
    title = (f"{suite.name} v{suite.version} · where the variance of {head.label} comes "
             f"from (factorial run)")
    table = Table(title=title, title_justify="left", header_style="bold", min_width=len(title))
    for name, justify in [("objective", "left"), ("variant", "left"), ("grid", "right"),
                          ("mean", "right"), ("sd between seeds", "right")]:
        table.add_column(name, justify=justify)
    sources = [*suite.seed_streams, INTERACTIONS]
    for name in sources:
        table.add_column(f"{name} share [95% CI]", justify="right")
    for label, variant, cells, d in report:
        if d is None:
            table.add_row(shown(label), shown(variant), f"{cells} cells", "–", "–",
                          *(["incomplete grid"] + ["–"] * (len(sources) - 1)))
            continue
        sd = head.format_delta(d.total_sd).lstrip("+±")
        table.add_row(shown(label), shown(variant), "×".join(map(str, d.levels)),
                      head.format(d.mean), sd, *(_share(d.source(n)) for n in sources))
    console.print(table)
    streams = "; ".join(f"{k}: {v}" for k, v in suite.seed_streams.items())
    console.print(f"{streams}; interactions: of streams with each other, and the rest")
    console.print(f"shares of the variance between plain seeds (ANOVA estimates, negative "
                  f"components shown as 0); intervals are generalized-pivot 95% intervals "
                  f"(harness/report/variance.py)"
                  f"{'; sd in percentage points' if head.percent else ''}")


def _share(source) -> str:
    if source.share is None:
        return "–"
    return (f"{100 * source.share:.0f}% [{100 * source.share_low:.0f}, "
            f"{100 * source.share_high:.0f}]")


def render_across(suite: Suite, variants: list[str], rows: list, left_out: list[str]) -> None:
    """The across-variants table: per objective, the mean of its per-variant headline means
    and its worst variant, formatted like the per-variant tables."""
    head = suite.headline_metric
    console = Console(width=None if sys.stdout.isatty() else 140)
    title = (f"{suite.name} v{suite.version}{_track(suite)} · across variants · {head.label} "
             f"({head.better} is better)")
    table = Table(title=title, title_justify="left", header_style="bold",
                  min_width=len(title))
    table.add_column("objective")
    table.add_column(f"mean over {len(variants)} variants", justify="right")
    table.add_column("worst variant", justify="right")
    for r in rows:
        name = shown(r.objective) + (" (ref)" if r.is_reference else "")
        table.add_row(name, head.format(r.mean),
                      f"{head.format(r.worst)} ({shown(r.worst_variant)})")
    console.print(table)
    notes = [f"across variants: mean over {', '.join(variants)} of each objective's "
             f"per-variant mean; worst = its worst variant ({head.better} is better)"]
    if left_out:
        notes.append(f"left out (no result on every shown variant): "
                     f"{', '.join(shown(x) for x in left_out)}")
    console.print("\n".join(notes), highlight=False)


def render_tuning(suite: Suite, report: Mapping[str, list[dict]]) -> None:
    """Per variant: each objective's chosen trial, the expected best validation score at a
    budget of 1, 2, 4 … k trials, its headline at the defaults and tuned, and the gain."""
    head = suite.headline_metric
    metric = suite.metric(suite.tuning.metric or suite.headline)
    console = Console(width=None if sys.stdout.isatty() else 140)
    k = suite.tuning.k
    budgets = [n for n in (1, 2, 4, 8, 16, 32) if n <= k]
    for variant, rows in report.items():
        title = (f"{suite.name} {variant} · tuned at k={k}: the trial chosen on "
                 f"{suite.tuning.validation_text} ({metric.name} there), and what tuning "
                 f"gained")
        table = Table(title=title, title_justify="left", header_style="bold")
        table.add_column("objective")
        table.add_column("chosen trial")
        for n in budgets:
            table.add_column(escape(f"E[best of {n}]"), justify="right")
        table.add_column("defaults", justify="right")
        table.add_column("tuned", justify="right")
        table.add_column(escape("gain [95% CI]"), justify="right")
        for r in rows:
            chosen = r["chosen"] or {}
            knobs = {**chosen.get("settings", {}), **chosen.get("hyperparameters", {})}
            text = (f"#{chosen['trial']} " + ", ".join(
                f"{n}={v:.3g}" if isinstance(v, float) else f"{n}={v}"
                for n, v in knobs.items())) if chosen else "none (every trial failed)"
            curve = r["budget"]["mean"] if r["budget"] else []
            best = [metric.format(curve[n - 1]) if n <= len(curve) else "–" for n in budgets]
            gain = r["gain"]
            table.add_row(shown(r["objective"]), escape(text), *best,
                          _mean_ci(head, r["defaults"]), _mean_ci(head, r["tuned"]),
                          "–" if gain is None else f"{head.format_delta(gain['mean'])} "
                          f"[{head.format_delta(gain['ci_low'])}, "
                          f"{head.format_delta(gain['ci_high'])}]")
        console.print(table)
    console.print(escape(
        f"chosen: {suite.tuning.selection}. E[best of n]: the expected best validation "
        f"score among n of the k trials drawn at random (Dodge et al. 2019), validation "
        f"{metric.name} as stored. gain: tuned − defaults on the same seeds (paired t "
        f"interval); the trials trained on seeds of their own."), highlight=False)


def render_sequential(report: Mapping) -> None:
    """Each (objective, variant) pair of a sequential run: its looks and where it stopped."""
    d = report["design"]
    console = Console(width=None if sys.stdout.isatty() else 140)
    table = Table(title=f"sequential seeds: looks at {d['start']}, {d['start'] + d['step']}, "
                        f"… {d['cap']} seeds", title_justify="left", header_style="bold")
    for column in ("objective", "variant", "seeds", "verdict", "p at each look"):
        table.add_column(column, justify="right" if column == "seeds" else "left")
    for pair in report["pairs"]:
        ps = "; ".join(f"{x['n']} seeds: p {x['p']:.2g}, bound {x['threshold']:.2g}"
                       for x in pair["looks"] if "p" in x)
        table.add_row(shown(pair["objective"]), pair["variant"], str(pair["seeds"]),
                      pair["verdict"], escape(ps))
    console.print(table)
    console.print(
        f"O'Brien–Fleming boundaries (Lan–DeMets spending) on the paired t-test, α = "
        f"{d['alpha']} two-sided split over {d['comparisons']} objective"
        f"{'s' * (d['comparisons'] > 1)} (Bonferroni): a pair gets more seeds only while "
        f"undecided; its error rate stays at α (bench/README.md, sequential.py).",
        highlight=False)


def _mean_ci(metric: MetricSpec, s: Mapping | None) -> str:
    if not s:
        return "–"
    if s["ci_low"] is None or math.isnan(s["ci_low"]):
        return metric.format(s["mean"])
    return (f"{metric.format(s['mean'])} [{metric.format(s['ci_low'])}, "
            f"{metric.format(s['ci_high'])}]")


def _track(suite: Suite) -> str:
    """" (tuned at k=8)" beside a tuned version; nothing for the defaults."""
    return "" if suite.track == "defaults" else f" ({suite.track})"
