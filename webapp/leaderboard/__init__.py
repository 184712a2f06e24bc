"""Every leaderboard table and plot the pages, the exports and the JSON API show.

Payloads are plain JSON-serializable dicts (NaN becomes ``None``), computed from the
suites' declarations (:mod:`harness.contract.suite`) and cached (:mod:`~webapp.leaderboard.cache`):

- :mod:`~webapp.leaderboard.boards`: per-variant tables, per-suite summaries, the ranked
  home table, exports;
- :mod:`~webapp.leaderboard.profiles`: an objective across suites, and two compared;
- :mod:`~webapp.leaderboard.plots`: strip, family, curve, scatter and reliability data;
- :mod:`~webapp.leaderboard.pages`: the suite page's view;
- :mod:`~webapp.leaderboard.lookup`: names the pages use, :class:`NotFound`;
- :mod:`~webapp.leaderboard.state`, :mod:`~webapp.leaderboard.pieces`,
  :mod:`~webapp.leaderboard.comparisons`: what a landing cell invalidates (per-variant
  keys), the per-variant headline numbers suite-wide payloads are recombined from, and the
  paired comparisons a rebuilt table reuses.
"""

from webapp.leaderboard.boards import (
    RANK_METHOD,
    HomeView,
    export_tables,
    home_table,
    home_view,
    suite_summary,
    table_page,
    table_page_json,
    variant_table,
    visible_rows,
)
from webapp.leaderboard.lookup import KINDS, NotFound
from webapp.leaderboard.pages import SuiteView, suite_page, suite_view
from webapp.leaderboard.plots import family_plot, family_series, strip_plot, variant_axis
from webapp.leaderboard.profiles import (
    ObjectiveView,
    compare,
    objective_choices,
    objective_profile,
    objective_suites,
    objective_view,
    runs_in_progress,
    runs_on_board,
    stored_slug_of,
)

__all__ = ["KINDS", "RANK_METHOD", "HomeView", "NotFound", "ObjectiveView", "SuiteView",
           "compare", "export_tables", "family_plot", "family_series", "home_table",
           "home_view", "objective_choices", "objective_profile", "objective_suites",
           "objective_view", "runs_in_progress", "runs_on_board", "strip_plot", "suite_page",
           "suite_summary", "suite_view", "stored_slug_of", "table_page", "table_page_json",
           "variant_axis", "variant_table", "visible_rows"]
