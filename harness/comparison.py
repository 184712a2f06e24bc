"""Two objectives on paired seeds, as :func:`harness.api.compare` returns them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas
    import plotly.graph_objects


class Comparison:
    """Two objectives on paired seeds, per variant: what the web app's compare page shows
    (``harness`` pairs seed k of one with seed k of the other: same init, data order and
    noise draw)."""

    def __init__(self, payload: dict):
        self.payload = payload
        self.a, self.b = payload["a"]["label"], payload["b"]["label"]
        self.overall = payload["overall"]

    def __repr__(self) -> str:
        return f"<Comparison {self.a} vs {self.b} on {self.payload['suite']}>"

    def to_pandas(self) -> pandas.DataFrame:
        """One row per variant: both means, the paired difference (positive = a better,
        whatever the metric's direction) with its 95% CI, P(a > b) and the p-value."""
        import pandas as pd

        records = []
        for r in self.payload["rows"]:
            d = r["diff"] or {}
            records.append({
                "variant": r["variant"], "default": r["default"], "pairs": r["n_pairs"],
                f"{self.a} mean": r["a"]["mean"], f"{self.b} mean": r["b"]["mean"],
                "difference": d.get("mean_diff"), "ci_low": d.get("diff_ci_low"),
                "ci_high": d.get("diff_ci_high"),
                f"P({self.a} > {self.b})": d.get("prob_improvement"),
                "p_value": d.get("p_value"), "distinguishable": d.get("distinguishable")})
        return pd.DataFrame.from_records(records)

    def _repr_html_(self) -> str:
        import html

        return f"<p>{html.escape(repr(self))}</p>" + self.to_pandas().to_html(index=False)

    def figure(self) -> plotly.graph_objects.Figure:
        """The compare page's forest plot of per-seed and mean differences."""
        from harness.report import figures
        return figures.figure("forest", self.payload)
