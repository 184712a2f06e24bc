"""Over 500 lines on purpose: the whole API in one document, as served, so no path drifts.

The JSON API's OpenAPI 3.1 description, built from data.

``ENDPOINTS`` lists every endpoint once (path, parameters, response schema, example
requests); ``schema()`` turns that into the document served at ``/api/openapi.json``
and the API index page renders the same list, so the two cannot drift apart.
Response shapes are JSON Schema (2020-12, as OpenAPI 3.1 uses) under
``components/schemas``. Numbers that can be undefined (a CI over one seed) are
``null`` in responses, never NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.contract.suite import REASONS

PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 200
TABLE_PAGE_SIZE_DEFAULT = 10  # variant tables per page of /api/suites/{name}
TABLE_PAGE_SIZE_MAX = 50
FINISHED = ("ok", "diverged", "failed", "timeout", "killed")
STATUSES = ("queued", "running", *FINISHED)


def _listed_pattern(words: tuple[str, ...] | list[str]) -> str:
    """A comma-separated list of ``words`` (spaces or tabs around each), as a regex."""
    one = r"[ \t]*(" + "|".join(words) + r")[ \t]*"
    return f"^{one}(,{one})*$"


# ---------------------------------------------------------------- schema helpers
def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict) -> dict:
    """``schema`` or null (JSON Schema 2020-12 spelling, as OpenAPI 3.1 wants)."""
    if "type" in schema and "$ref" not in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        return {**schema, "type": [*kinds, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def obj(required: dict[str, dict], optional: dict[str, dict] | None = None, *,
        description: str = "", extra: bool = False) -> dict:
    """An object schema: every key of ``required`` must be present."""
    out: dict[str, Any] = {"type": "object",
                           "properties": {**required, **(optional or {})},
                           "required": list(required)}
    if not extra:
        out["additionalProperties"] = False
    if description:
        out["description"] = description
    return out


def arr(items: dict, description: str = "") -> dict:
    out = {"type": "array", "items": items}
    return {**out, "description": description} if description else out


def mapping(values: dict, description: str = "") -> dict:
    out = {"type": "object", "additionalProperties": values}
    return {**out, "description": description} if description else out


STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
NUM = {"type": "number"}
NUM_OR_NULL = {"type": ["number", "null"]}
ANY_OBJECT = {"type": "object"}


def page_of(item: str, what: str) -> dict:
    return obj({
        "count": {**INT, "description": f"number of {what} matching the filters"},
        "page": INT,
        "page_size": INT,
        "pages": INT,
        "next": nullable({**STR, "description": "path of the next page"}),
        "previous": nullable(STR),
        "results": arr(ref(item)),
    }, description=f"One page of {what}, in a stable order.")


COMPARISON = obj({
    "prob_improvement": {**NUM_OR_NULL, "description": "P(this objective beats the reference) "
                         "over seed pairs; 0.5 = no difference"},
    "distinguishable": {**BOOL, "description": "p_holm < 0.05: the paired t-test, "
                        "Holm-corrected over the objectives of the table"},
}, {
    "n_pairs": INT, "prob_ci_low": NUM_OR_NULL, "prob_ci_high": NUM_OR_NULL,
    "mean_diff": NUM_OR_NULL, "diff_ci_low": NUM_OR_NULL, "diff_ci_high": NUM_OR_NULL,
    "p_value": {**NUM_OR_NULL, "description": "two-sided paired t-test of mean_diff = 0 "
                "(null below the suite's minimum of seeds)"},
    "p_holm": {**NUM_OR_NULL, "description": "p_value, Holm-corrected"},
}, description="Paired-seed comparison with the suite's reference objective "
               "(positive mean_diff = better, whatever the metric's direction).", extra=True)

TABLE_ROW = obj({
    "objective": {**STR, "description": "version label (hyperparameters when not defaults)"},
    "slug": STR,
    "version_id": INT,
    "is_builtin": BOOL,
    "seeds": {**INT, "description": "seeds with status ok"},
    "diverged": INT,
    "failed": INT,
    "mean": NUM_OR_NULL,
    "std": NUM_OR_NULL,
    "ci_low": {**NUM_OR_NULL, "description": "95% Student-t CI of the mean (null below the "
                                             "suite's minimum of seeds)"},
    "ci_high": NUM_OR_NULL,
    "iqm": NUM_OR_NULL,
    "secondary": mapping(NUM_OR_NULL, "mean over seeds of each other metric"),
    "values": mapping(NUM_OR_NULL, "headline value per seed (keys are seeds)"),
    "vs_reference": nullable(ref("Comparison")),
    "tied_with_best": {**BOOL, "description": "not distinguishable from the best row (paired "
                       "t-test, Holm-corrected); false below the suite's minimum of seeds"},
    "is_reference": BOOL,
}, {
    "verified": {**BOOL, "description": "uploaded local results that the server verified "
                 "by re-running a random sample of their seeds"},
    "rank_low": nullable({**INT, "description": "95% bootstrap interval of the row's rank "
                          "(1 = best) among the rows with enough seeds: low end"}),
    "rank_high": nullable({**INT, "description": "its high end"}),
}, description="One objective version in one variant: headline over seeds.", extra=True)

VARIANT_TABLE = obj({
    "suite": STR,
    "suite_version": STR,
    "variant": STR,
    "headline": {**STR, "description": "the metric the rows are ranked by"},
    "higher_is_better": BOOL,
    "headline_spec": ref("MetricSpec"),
    "reference": {**STR, "description": "label of the reference objective's row"},
    "metrics": arr(STR, "metric names: the headline, then the secondary metrics"),
    "rows": arr(ref("TableRow"), "best first"),
}, {
    "variant_description": STR, "description": STR, "headline_label": STR, "percent": BOOL,
    "metric_specs": arr(ref("MetricSpec")),
}, description="One variant's leaderboard table. Values are in the metric's unit "
               "(percent metrics as fractions in [0, 1]).", extra=True)

METRIC_SPEC = obj({
    "name": STR, "label": STR,
    "better": {"type": "string", "enum": ["higher", "lower", "neither"],
               "description": "which way is better; 'neither' for descriptive metrics"},
    "higher_is_better": BOOL,
    "unit": {"type": "string", "enum": ["percent", "probability", "pvalue", "number"],
             "description": "percent values are stored as fractions and shown ×100"},
    "decimals": {**INT, "description": "decimals shown (significant digits of a p-value)"},
}, {"description": STR, "percent": BOOL, "short": STR})

CURVE_SPEC = obj({
    "name": STR, "label": STR,
    "x_label": {**STR, "description": "what the points are indexed by (epoch, ε, ...)"},
    "x_values": nullable({**STR, "description": "the stored curve holding the x values; "
                                                "null: 1, 2, ..., n"}),
    "unit": STR,
}, {"x_unit": STR, "decimals": INT, "log": BOOL, "drawn": BOOL,
    "x_ticks": {"type": "array", "items": STR,
                "description": "names of the points 1, 2, ..., n (categories: attacks); "
                               "empty for a numeric axis"}})

VARIANT = obj({
    "name": STR,
    "description": STR,
    "config": ANY_OBJECT,
    "default": {**BOOL, "description": "part of the default run (real-data variants are opt-in)"},
    "queue": {**STR, "description": "worker queue (cpu or gpu)"},
})

SUITE = obj({
    "name": STR,
    "version": {**STR, "description": "results compare only within one suite version"},
    "hooks": arr(STR, "the objective hooks the suite calls"),
    "lifts": arr(STR, "hooks the suite lifts into its own (an objective needs one of "
                      "hooks or lifts)"),
    "description": STR,
    "headline": STR,
    "reference": {**STR, "description": "slug of the reference objective"},
    "baselines": arr(STR, "the suite's own built-in objectives (its default run)"),
    "anchors": obj({"worst": NUM, "best": NUM}, description="headline values normalized "
                   "to 0 and 1 for the cross-suite score"),
    "metrics": arr(ref("MetricSpec")),
    "curves": arr(ref("CurveSpec"), "per-seed series the suite stores"),
    "scatters": arr(obj({"x": STR, "y": STR}), "per-seed metric pairs it plots"),
    "reliability": nullable(ANY_OBJECT),
    "variant_axis": nullable(obj({"key": STR, "label": STR, "unit": STR})),
    "variants": arr(ref("Variant")),
    "settings": {**ANY_OBJECT, "description": "the fixed training and evaluation settings"},
    "url": STR,
})

VERSION = obj({
    "id": INT,
    "label": STR,
    "code_sha256": STR,
    "hyperparameters": ANY_OBJECT,
    "created": {**STR, "format": "date-time"},
})

SUMMARY_ROW = obj({
    "objective": {**STR, "description": "version label"},
    "variants_covered": {**INT, "description": "default variants with an ok headline"},
    "variants_total": INT,
    "mean": {**NUM_OR_NULL, "description": "mean over the covered default variants of the "
             "per-variant headline mean"},
    "variant_means": mapping(NUM, "covered default variant → headline mean over ok seeds"),
    "worst": {**NUM_OR_NULL, "description": "the worst per-variant headline mean by the "
              "headline's direction (largest when lower is better); null when none covered"},
    "worst_variant": nullable({**STR, "description": "the variant of worst"}),
    "improvement": {**NUM_OR_NULL, "description": "mean paired improvement over the "
                    "reference across covered variants (positive = better)"},
    "normalized": {**NUM_OR_NULL, "description": "mean anchored headline (0 = worst anchor, "
                   "1 = best)"},
    "ranked": {**BOOL, "description": "the suite's minimum of seeds on each of its ranked "
               "variants: counted in the cross-suite rank (else provisional)"},
}, description="One objective version across a suite's default variants.", extra=True)

OBJECTIVE = obj({
    "slug": STR,
    "name": STR,
    "description": STR,
    "paper_url": STR,
    "builtin": BOOL,
    "owner": nullable({**STR, "description": "username; null for built-in baselines"}),
    "visibility": {"enum": ["public", "private"],
                   "description": "of the code; results are public either way"},
    "created": {**STR, "format": "date-time"},
    "url": STR,
    "versions": arr(ref("ObjectiveVersion"), "oldest first"),
})

PROFILE = obj({
    "slug": STR,
    "name": STR,
    "description": STR,
    "paper_url": nullable(STR),
    "owner": nullable(STR),
    "is_builtin": BOOL,
    "visibility": {"enum": ["public", "private"]},
    "code_visible": {**BOOL, "description": "whether this viewer may read the code"},
    "versions": arr(ref("ObjectiveVersion"), "newest first"),
    "suites": arr(obj({"suite": STR, "suite_version": STR,
                       "rows": arr(ANY_OBJECT, "this objective's row in each variant's table"),
                       "summary": arr(ref("SummaryRow"), "across the default variants: "
                                      "relative to the reference, mean, worst variant")},
                      extra=True), "every suite with results"),
}, {
    "code": {**nullable(STR), "description": "source of the newest version: absent unless "
             "the code is public or the viewer owns the objective"},
    "profile": nullable(obj({
        "slug": STR, "label": nullable(STR),
        "suites": arr(obj({
            "suite": STR, "status": {"enum": ["scored", "provisional", "missing"]},
            "improvement": NUM_OR_NULL, "improvement_ci_low": NUM_OR_NULL,
            "improvement_ci_high": NUM_OR_NULL,
            "verdict": nullable({"enum": ["better", "worse", "not resolved", "reference"],
                                 "description": "the suite page's paired t-test, "
                                 "Holm-corrected over the suite's objectives"}),
            "resolvable": nullable({**ANY_OBJECT, "description": "the smallest improvement "
                                    "the suite's seeds resolve (difference, uncorrected, "
                                    "spread, seeds, compared)"}),
            "score": NUM_OR_NULL, "score_low": NUM_OR_NULL, "score_high": NUM_OR_NULL,
            "rank": nullable(INT), "rank_low": nullable(INT), "rank_high": nullable(INT),
            "of": nullable({**INT, "description": "objectives ranked: the suite's "
                            "baselines with a score, and this one"}),
            "tied": BOOL}, extra=True), "per suite, as `harness profile` prints it"),
        "aggregate": nullable(obj({"score": NUM, "score_low": NUM, "score_high": NUM,
                                   "suites": arr(STR), "n": INT})),
        "unscored": arr(STR), "aggregate_rule": STR, "rank_rule": STR}),
        ),
}, description="Everything the objective page shows (built by webapp.leaderboard); "
    "training curves only with ?curves=1.", extra=True)

RESULT = obj({
    "id": INT,
    "objective": {**STR, "description": "objective slug"},
    "version_id": INT,
    "version_label": STR,
    "code_sha256": STR,
    "hyperparameters": ANY_OBJECT,
    "suite": STR,
    "suite_version": STR,
    "variant": STR,
    "variant_hash": STR,
    "seed": INT,
    "status": {"enum": list(STATUSES)},
    "reason": {"enum": ["", *REASONS], "description": "why a cell ended failed, timeout or "
               "killed: " + "; ".join(f"{k}: {v}" for k, v in REASONS.items())},
    "attempts": INT,
    "diverged_step": nullable(INT),
    "wall_time": NUM_OR_NULL,
    "finished_at": nullable({**STR, "format": "date-time"}),
    "environment": ANY_OBJECT,
    "error": nullable({**STR, "description": "failure reason; null when withheld (private "
                       "code of another user's objective)"}),
    "metrics": mapping(NUM_OR_NULL, "metric name → value"),
}, {
    "curves": mapping(arr(NUM_OR_NULL), "curve name → values over training (?curves=1)"),
}, description="One cell (objective version, suite, variant, seed) with its metrics.")

DIFFERENCE = obj({
    "variant": STR, "seed": INT,
    "metric": {**STR, "description": "a metric, status, diverged_step, 'curve[i]' (a curve's "
               "first differing point) or 'curve name' (its length)"},
    "local": {"description": "the uploaded value (null: absent)"},
    "server": {"description": "the server's value (null: absent)"},
})

UPLOAD_STATE = obj({
    "id": INT,
    "status": {"enum": ["pending", "verified", "mismatch", "unverifiable"],
               "description": "pending until the sampled cells ran on the server; verified "
               "only when every value of theirs equals the upload's exactly"},
    "status_text": STR,
    "reason": {**STR, "description": "why it cannot be verified (empty otherwise)"},
    "objective": {**STR, "description": "objective slug"},
    "version_id": INT,
    "version_label": STR,
    "suite": STR,
    "suite_version": STR,
    "cells": {**INT, "description": "cells uploaded"},
    "sample": arr(obj({"variant": STR, "seed": INT}), "the cells the server re-runs, drawn "
                  "at random after the upload: max(1, ceil(fraction × seeds)) per variant"),
    "differences": arr(ref("Difference"), "every value the server did not reproduce"),
    "url": {**STR, "description": "the upload's page"},
    "run_url": {**STR, "description": "the server's run of the sample"},
}, description="An upload of local results and its verification.")

CLAIMED_CELL = obj({
    "variant": {**STR, "description": "a public (default) variant of the suite"},
    "seed": {**INT, "minimum": 0, "maximum": 2 ** 31 - 1},
    "status": {"enum": ["ok", "diverged"]},
    "metrics": mapping(NUM, "metric name → finite value (the suite's metrics only)"),
    "curves": mapping(arr(NUM_OR_NULL), "curve name → values (null where not finite)"),
    "environment": {**ANY_OBJECT, "description": "the cell's environment record as stored "
                    "locally (packages, cpu_capability, device, torch_threads, ...)"},
}, {"diverged_step": nullable(INT), "wall_time": NUM_OR_NULL})

UPLOAD = obj({
    "format": {"const": 1, "description": "the upload format (harness submit's)"},
    "objective": obj({"name": {**STR, "minLength": 1, "maxLength": 100,
                               "description": "the file's stem; its slug names the objective"},
                      "code": {**STR, "minLength": 1, "description": "the objective's source"},
                      "hyperparameters": ANY_OBJECT},
                     {"visibility": {"enum": ["public", "private"], "default": "public",
                                     "description": "of the code; results are public once "
                                     "verified either way"}}),
    "suite": {**STR, "description": "a suite name (GET /api/suites)"},
    "suite_version": {**STR, "description": "must be the version the server runs"},
    "cells": {**arr(ref("ClaimedCell"), "at least the suite's minimum of seeds on each "
                    "variant, each (variant, seed) once"), "minItems": 1},
}, description="What `harness submit` sends: an objective version and its local results.")

ERROR = obj({"error": {**STR, "description": "what was wrong, in words"},
             "status": INT})

SCORES = obj({
    "rank_method": {**STR, "description": "how the score, its interval and the ranks are "
                    "computed (harness/report/aggregate.py)"},
    "track": {"enum": ["defaults", "tuned"], "description": "the track scored: tuned scores "
              "are over the suites with a tuned protocol only, not comparable with defaults'"},
    "rows": arr(obj({
        "objective": {**STR, "description": "display label"}, "slug": STR,
        "is_builtin": BOOL,
        "score": {**NUM_OR_NULL, "description": "per suite the IQM of the normalized "
                  "headline over every (ranked variant, seed), then the mean over suites; "
                  "null: provisional"},
        "score_low": NUM_OR_NULL, "score_high": NUM_OR_NULL,
        "score_n": {**INT, "description": "normalized per-seed scores it stands on"},
        "coverage": arr(STR, "the suites it is scored on: objectives are ranked only "
                        "against those with the same"),
        "rank": nullable(INT), "rank_low": nullable(INT), "rank_high": nullable(INT),
        "rank_of": nullable({**INT, "description": "objectives ranked with it (scored on "
                             "the same suites)"}),
        "tied": {**BOOL, "description": "its difference from the first of its tie group "
                 "is not resolved by the seeds"}}), "best first, as the home page"),
}, description="The cross-suite ranking the home page shows.")

COMPONENTS: dict[str, dict] = {
    "Error": ERROR,
    "Scores": SCORES,
    "MetricSpec": METRIC_SPEC,
    "CurveSpec": CURVE_SPEC,
    "Variant": VARIANT,
    "Suite": SUITE,
    "SuiteList": obj({"suites": arr(ref("Suite"))}),
    "Comparison": COMPARISON,
    "TableRow": TABLE_ROW,
    "VariantTable": VARIANT_TABLE,
    "SuiteDetail": obj({
        "suite": ref("Suite"),
        "count": {**INT, "description": "number of variant tables requested, over all pages"},
        "page": INT, "page_size": INT, "pages": INT,
        "next": nullable({**STR, "description": "path of the next page"}),
        "previous": nullable(STR),
        "tables": arr(ref("VariantTable"), "this page's tables, in the requested order")},
        description="The suite and one page of its variant tables."),
    "ObjectiveVersion": VERSION,
    "Objective": OBJECTIVE,
    "ObjectivePage": page_of("Objective", "objectives"),
    "SummaryRow": SUMMARY_ROW,
    "ObjectiveProfile": PROFILE,
    "Result": RESULT,
    "ResultPage": page_of("Result", "results"),
    "Difference": DIFFERENCE,
    "UploadState": UPLOAD_STATE,
    "ClaimedCell": CLAIMED_CELL,
    "Upload": UPLOAD,
    "RowKey": {"type": "object", "required": ["version_key", "row_key"],
               "additionalProperties": False, "properties": {
                   "version_key": {**STR, "pattern": "^[0-9a-f]{64}$"},
                   "row_key": {**STR, "pattern": "^[0-9a-f]{64}$",
                               "description": "run with `harness run --sandbox --row-key`"}}},
    "Quota": {"type": "object", "additionalProperties": False,
              "required": ["held_out_runs_per_day", "used", "remaining", "next_frees_at",
                           "held_out_variants"], "properties": {
                  "held_out_runs_per_day": {**INT, "description": "the limit per user"},
                  "used": {**INT, "description": "submissions that ran held-out variants in "
                                                 "the last 24 hours"},
                  "remaining": INT,
                  "next_frees_at": nullable({**STR, "format": "date-time",
                                             "description": "when the oldest counted run "
                                                            "leaves the 24 hours"}),
                  "held_out_variants": {**BOOL, "description": "whether this server runs "
                                                              "any"}}},
}


# ---------------------------------------------------------------- endpoints
@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "path" | "query"
    schema: dict
    description: str
    required: bool = False


@dataclass(frozen=True)
class Endpoint:
    """One GET endpoint. ``examples`` are request paths with ``{suite}``, ``{variant}``
    and ``{objective}`` filled from live data by the index page and the tests."""

    path: str
    url_name: str
    summary: str
    description: str
    response: str | None  # a components/schemas name; None: the OpenAPI document itself
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = ()
    examples: tuple[str, ...] = field(default=())


PAGE = Param("page", "query", {**INT, "minimum": 1, "maximum": 2 ** 63 - 1, "default": 1},
             "page number, from 1")
PAGE_SIZE = Param("page_size", "query",
                  {**INT, "minimum": 1, "maximum": PAGE_SIZE_MAX, "default": PAGE_SIZE_DEFAULT},
                  f"records per page (at most {PAGE_SIZE_MAX})")

TRACK = Param("track", "query", {"enum": ["defaults", "tuned"], "default": "defaults"},
              "each objective at its defaults, or every objective tuned with the same budget "
              "(suites with a tuned protocol only; docs/tuning.md)")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "/api/suites", "api-suites", "List the suites",
        "Every registered suite with its version, hook, headline metric, metrics and "
        "variants (public variants only).",
        "SuiteList", examples=("/api/suites",)),
    Endpoint(
        "/api/suites/{name}", "api-suite", "One suite with its leaderboard tables",
        "The suite and, per variant, the leaderboard table: mean over seeds with its 95% "
        "Student-t CI, seed and divergence counts, per-seed values and the paired "
        "comparison with the reference. Default: every default variant that has results. "
        f"Paged by variant: {TABLE_PAGE_SIZE_DEFAULT} tables per page unless page_size says "
        "otherwise; follow `next`.",
        "SuiteDetail",
        params=(Param("name", "path", STR, "suite name", required=True),
                Param("variant", "query", STR, "variant(s) to include: repeat the parameter "
                      "or separate with commas; default: the default variants with results"),
                PAGE,
                Param("page_size", "query",
                      {**INT, "minimum": 1, "maximum": TABLE_PAGE_SIZE_MAX,
                       "default": TABLE_PAGE_SIZE_DEFAULT},
                      f"variant tables per page (at most {TABLE_PAGE_SIZE_MAX})"),
                TRACK),
        errors=(400, 404),
        examples=("/api/suites/{suite}?variant={variant}", "/api/suites/{suite}")),
    Endpoint(
        "/api/scores", "api-scores", "The cross-suite ranking",
        "Every objective's score over the suites it is scored on, with its 95% stratified "
        "bootstrap interval, its rank among the objectives scored on the same suites with "
        "the rank's interval, and tie marks: the home page's table, best first.",
        "Scores",
        params=(Param("kind", "query", {"enum": ["all", "builtin", "submitted"],
                                        "default": "all"},
                      "built-in baselines, submissions or all (ranks stay global)"),
                TRACK),
        errors=(400,),
        examples=("/api/scores", "/api/scores?kind=builtin", "/api/scores?track=tuned")),
    Endpoint(
        "/api/objectives", "api-objectives", "List the objectives",
        "Objectives (built-in baselines and submissions) with their versions: label, "
        "code hash and hyperparameters. Code is never listed here. Ordered by slug.",
        "ObjectivePage",
        params=(Param("builtin", "query",
                      {"enum": ["true", "false", "1", "0", "yes", "no"]},
                      "only built-in baselines (true, 1, yes) or only submissions "
                      "(false, 0, no)"),
                PAGE, PAGE_SIZE),
        errors=(400,),
        examples=("/api/objectives", "/api/objectives?builtin=true&page_size=20")),
    Endpoint(
        "/api/objectives/{slug}", "api-objective", "One objective's profile",
        "What the objective page shows: description, author, hyperparameters, every "
        "suite's numbers. The code is included only if it is public or yours.",
        "ObjectiveProfile",
        params=(Param("slug", "path", STR, "objective slug", required=True),
                Param("curves", "query", {"enum": ["0", "1", "false", "true", "no", "yes"],
                                          "default": "0"},
                      "1: include training curves (mean ± s.d. band and every seed) for every "
                      "suite and variant")),
        errors=(400, 404),
        examples=("/api/objectives/{objective}", "/api/objectives/{objective}?curves=1")),
    Endpoint(
        "/api/results", "api-results", "Per-seed results (tidy)",
        "One record per cell (objective version × suite × variant × seed) with its "
        "metrics, in a stable order (by cell id). Comma-separated lists are accepted "
        "for variant, seed and status.",
        "ResultPage",
        params=(Param("suite", "query", STR, "suite name"),
                Param("suite_version", "query", STR, "suite version (default: all)"),
                Param("variant", "query", STR, "variant name(s); checked against the suite "
                      "when one is given"),
                Param("objective", "query", STR, "objective slug"),
                Param("version", "query", {**INT, "minimum": 1, "maximum": 2 ** 63 - 1},
                      "objective version id"),
                Param("seed", "query",
                      {**STR, "pattern": r"^[ \t]*[0-9]+[ \t]*(,[ \t]*[0-9]+[ \t]*)*$"},
                      "seed(s): non-negative integers, comma-separated or repeated (a seed "
                      "over 2147483647 matches no cell)"),
                Param("status", "query", {**STR, "pattern": _listed_pattern(STATUSES)},
                      "status(es): " + ", ".join(STATUSES)
                      + "; default: the finished ones (" + ", ".join(FINISHED) + ")"),
                Param("curves", "query", {"enum": ["0", "1", "false", "true", "no", "yes"],
                                          "default": "0"},
                      "1: include the training curves"),
                PAGE, PAGE_SIZE),
        errors=(400, 404),
        examples=("/api/results?suite={suite}&variant={variant}&page_size=20",
                  "/api/results?objective={objective}&seed=0&curves=1")),
    Endpoint(
        "/api/openapi.json", "api-openapi", "This description (OpenAPI 3.1)",
        "The OpenAPI 3.1 document for every endpoint above.",
        None, examples=("/api/openapi.json",)),
)


@dataclass(frozen=True)
class TokenOperation:
    """An operation that needs an API token (``Authorization: Bearer``): uploads."""

    path: str
    url_name: str
    method: str
    summary: str
    description: str
    response: str
    status: int
    body: str | None = None  # a components/schemas name
    params: tuple[Param, ...] = ()
    errors: tuple[int, ...] = ()


TOKEN_OPERATIONS: tuple[TokenOperation, ...] = (
    TokenOperation(
        "/api/uploads", "api-uploads", "post", "Upload local results for verification",
        "An objective version and its local results on one suite (what `harness submit` "
        "sends, at most settings.MAX_UPLOAD_BYTES). The code is validated in the sandbox; "
        "the server then re-runs a random sample of the seeds and marks the upload verified "
        "only when its numbers equal the uploaded ones exactly. Nothing is stored when it "
        "is refused.", "UploadState", 201, body="Upload",
        errors=(400, 401, 409, 413, 415, 429, 503)),
    TokenOperation(
        "/api/uploads/{id}", "api-upload", "get", "One of your uploads",
        "The upload's verification state: pending, verified, mismatch (with every value "
        "that differs) or unverifiable (with the reason).", "UploadState", 200,
        params=(Param("id", "path", {**INT, "minimum": 1}, "upload id", required=True),),
        errors=(401, 404)),
    TokenOperation(
        "/api/row-keys/{version_key}", "api-row-key", "get",
        "The sandbox's row order for one objective version",
        "The key this server's sandbox draws a version's batch row order from. A local "
        "sandboxed run with it (`harness run --sandbox --row-key`, which `harness submit` "
        "explains) sends rows in the server's order, so an objective whose ops depend on a "
        "value's place (pow, sigmoid) can be verified to the last bit. The key depends on "
        "the version's code and hyperparameters (its version key): a loss cannot carry its "
        "own, and another version's orders rows differently.", "RowKey", 200,
        params=(Param("version_key", "path", {**STR, "pattern": "^[0-9a-f]{64}$"},
                      "the objective version's key (sha256 of its code hash and "
                      "hyperparameters), as `harness submit` computes it", required=True),),
        errors=(400, 401)),
    TokenOperation(
        "/api/quota", "api-quota", "get", "Your held-out runs left today",
        "Held-out variants are drawn from this server's secret and run with every web "
        "submission, within HARNESS_HELDOUT_RUNS_PER_DAY submissions per user in any 24 "
        "hours; past it a submission runs the public variants only. A submission whose "
        "held-out cells all failed for the infrastructure's reason does not count.",
        "Quota", 200, errors=(401,)),
)


# ---------------------------------------------------------------- the document
EMPTY = {"type": "string", "maxLength": 0}


def _parameter(p: Param) -> dict:
    """An optional query parameter given empty (``?page_size=``, as an HTML form sends an
    unfilled field) is the same as not given: the document says so."""
    required = p.required or p.where == "path"
    schema = p.schema if required else {"anyOf": [p.schema, EMPTY]}
    return {"name": p.name, "in": p.where, "required": required,
            "description": p.description + ("" if required else " (empty: not given)"),
            "schema": schema}


def _json_response(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR_TEXT = {400: "bad parameter", 404: "unknown suite, variant or objective"}
TOKEN_ERROR_TEXT = {
    400: "the upload or the version key is malformed or does not pass validation (the "
         "message says which field)", 401: "no, unknown or revoked API token",
    404: "no such upload of yours",
    409: "the suite version differs from the server's, or the objective's name is another "
         "user's", 413: "the body is over the size limit", 415: "not application/json",
    429: "verifying it would pass your limit of queued cells",
    503: "the sandbox is unavailable (nothing stored)"}


def _operation(e: Endpoint) -> dict:
    ok = ANY_OBJECT if e.response is None else ref(e.response)
    responses = {"200": _json_response(e.summary, ok)}
    for status in e.errors:
        responses[str(status)] = _json_response(ERROR_TEXT[status], ref("Error"))
    return {"operationId": e.url_name.replace("-", "_"), "summary": e.summary,
            "description": e.description, "parameters": [_parameter(p) for p in e.params],
            "responses": responses}


def _token_operation(o: TokenOperation) -> dict:
    responses = {str(o.status): _json_response(o.summary, ref(o.response))}
    for status in o.errors:
        responses[str(status)] = _json_response(TOKEN_ERROR_TEXT[status], ref("Error"))
    out = {"operationId": o.url_name.replace("-", "_"), "summary": o.summary,
           "description": o.description, "parameters": [_parameter(p) for p in o.params],
           "security": [{"token": []}], "responses": responses}
    if o.body:
        out["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": ref(o.body)}}}
    return out


def _paths() -> dict:
    paths = {e.path: {"get": _operation(e)} for e in ENDPOINTS}
    for o in TOKEN_OPERATIONS:
        paths.setdefault(o.path, {})[o.method] = _token_operation(o)
    return paths


def schema(server: str = "/") -> dict:
    """The OpenAPI 3.1 document (a JSON-serializable dict)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Objective Harness API",
            "version": "1",
            "description": "JSON API of the Objective Harness leaderboard: suites, "
                           "objectives and per-seed results, read without authentication "
                           "(private code is only returned to its owner, session login); "
                           "uploads of local results (`harness submit`) with an API token "
                           "from the account page.",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "servers": [{"url": server}],
        "paths": _paths(),
        "components": {"schemas": COMPONENTS, "securitySchemes": {
            "token": {"type": "http", "scheme": "bearer",
                      "description": "an API token from your account page (/accounts/)"}}},
    }
