"""Terminal rendering (rich): the progress bar and the per-variant result tables."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.report import TableRow
from suites.base import Suite


@contextlib.contextmanager
def progress_bar(total: int, quiet: bool = False) -> Iterator[Callable[[str], Callable]]:
    """Yields ``advance(label)``, which returns the callback a suite calls with cell fractions."""
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=quiet or total == 0,
                  transient=False) as progress:
        task = progress.add_task("cells", total=total)

        def advance(label: str) -> Callable[[float], None]:
            progress.update(task, description=label)
            return lambda cells: progress.advance(task, cells)

        yield advance
        progress.update(task, description="done", completed=total)


def render_tables(suite: Suite, variants: list[str], tables: dict[str, list[TableRow]],
                  secondary: tuple[str, ...]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 140)
    head = suite.metric(suite.headline)
    for v in variants:
        table = Table(title=f"{suite.name} v{suite.version} · {v} · {head.label}",
                      title_justify="left", header_style="bold", caption_justify="left")
        table.add_column("objective")
        table.add_column("mean [95% CI]", justify="right")
        table.add_column("IQM", justify="right")
        table.add_column("seeds", justify="right")
        table.add_column("div", justify="right")
        table.add_column(f"P(>{suite.reference})", justify="right")
        table.add_column(f"Δ vs {suite.reference} [95% CI]", justify="right")
        for m in secondary:
            table.add_column(suite.metric(m).short or m, justify="right")
        for r in tables[v]:
            table.add_row(*_cells(r, head.percent, secondary,
                                  [suite.metric(m).percent for m in secondary]))
        console.print(table)
    notes = ["★ tied with the best (paired-bootstrap 95% CI of the difference includes 0)",
             f"~ not distinguishable from {suite.reference} (same test)",
             f"P(>{suite.reference}) = probability of improvement over paired seeds",
             "div = diverged seeds (excluded from the mean)"]
    notes += [f"{suite.metric(m).short or m} = {suite.metric(m).label}" for m in secondary]
    console.print("\n".join(notes), highlight=False)


def _cells(r: TableRow, percent: bool, secondary, sec_percent) -> list[str]:
    f = _fmt(percent)
    s = r.summary
    name = ("★ " if r.tied_with_best else "  ") + r.objective
    if r.is_reference:
        name += " (ref)"
    mean = f"{f(s.mean)} [{f(s.ci_low)}, {f(s.ci_high)}]" if s.n else "—"
    prob, delta = "", ""
    if r.vs_reference is not None:
        c = r.vs_reference
        mark = "" if c.distinguishable else "~"
        prob = f"{mark}{c.prob_improvement:.2f}"
        delta = f"{_signed(c.mean_diff, percent)} [{_signed(c.diff_ci_low, percent)}, " \
                f"{_signed(c.diff_ci_high, percent)}]"
    failed = f" ({r.failed} failed)" if r.failed else ""
    return [name, mean, f(s.iqm) if s.n else "—", f"{r.seeds}{failed}", str(r.diverged),
            prob, delta] + [_fmt(p)(r.secondary.get(m, math.nan))
                            for m, p in zip(secondary, sec_percent, strict=True)]


def _fmt(percent: bool) -> Callable[[float], str]:
    def f(x: float) -> str:
        if x is None or math.isnan(x):
            return "—"
        return f"{100 * x:.1f}" if percent else f"{x:.3g}"
    return f


def _signed(x: float, percent: bool) -> str:
    if math.isnan(x):
        return "—"
    return f"{100 * x:+.1f}" if percent else f"{x:+.3g}"
