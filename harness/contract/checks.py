"""What a suite declaration must satisfy, checked once when it is declared
(``Suite.__post_init__``): everything shared code relies on, so a mistake fails at import
with the suite's name, not on a page."""

from __future__ import annotations

import json
from typing import Any

from harness.contract.suite import (
    INFO_TYPES,
    HeatmapSpec,
    Suite,
    SuiteError,
    is_number,
)


def check(s: Suite) -> None:
    """Everything shared code relies on, checked once when the suite is declared."""
    def fail(message: str) -> None:
        raise SuiteError(f"suite {s.name!r}: {message}")

    if not s.hooks:
        fail("declares no hook")
    if s.min_seeds < 2:
        fail(f"min_seeds must be at least 2 (one seed has no interval), got {s.min_seeds}")
    if not isinstance(s.chunk, int) or isinstance(s.chunk, bool) or s.chunk < 1:
        fail(f"a member chunk holds at least 1 seed, got {s.chunk!r}")
    if s.tuning is not None:
        _check_tuning(s, fail)
    defaults = {v.name for v in s.variants if v.default}
    outside = [v for v in s.ranked if v not in defaults]
    if outside or len(set(s.ranked)) != len(s.ranked):
        fail(f"ranked variants must be distinct default variants (a submission runs those); "
             f"not: {', '.join(outside) or 'repeated names'}")
    from harness.contract.seeding import FACTORS  # imports no numpy

    unknown = [k for k in s.seed_streams if k not in FACTORS]
    if unknown or len(s.seed_streams) == 1:
        fail(f"seed_streams must name two or more of {', '.join(FACTORS)}; "
             f"not: {', '.join(unknown) or 'one stream alone'}")
    metric_names = [m.name for m in s.metrics]
    if len(set(metric_names)) != len(metric_names):
        fail("metric names repeat")
    if s.headline not in metric_names:
        fail(f"headline {s.headline!r} is not one of its metrics")
    if s.metric(s.headline).better == "neither":
        fail(f"headline {s.headline!r} needs a direction (better='higher' or 'lower')")
    for name, anchors in s.anchors.items():
        if name not in metric_names:
            fail(f"anchors for unknown metric {name!r}")
        if s.metric(name).better == "neither":
            fail(f"anchors for {name!r}, which has no direction")
        if anchors.worst == anchors.best:
            fail(f"anchors of {name!r} are equal")
        better = (anchors.best > anchors.worst) == (s.metric(name).higher_is_better)
        if not better:
            fail(f"anchors of {name!r} point the wrong way for a {s.metric(name).better}-"
                 f"is-better metric (worst={anchors.worst}, best={anchors.best})")
    if s.headline not in s.anchors:
        fail(f"no normalization anchors for its headline {s.headline!r} (the cross-suite "
             f"score needs them): declare anchors={{{s.headline!r}: Anchors(worst, best)}}")
    variant_names = [v.name for v in s.variants]
    if not variant_names or len(set(variant_names)) != len(variant_names):
        fail("needs variants with distinct names")
    for v in s.variants:
        if v.held_out_of:
            fail(f"variant {v.name!r} names a public twin: declare it in held_out")
    for v in s.held_out:
        if v.name in variant_names or [h.name for h in s.held_out].count(v.name) > 1:
            fail(f"held-out variant {v.name!r} repeats a variant's name")
        if v.held_out_of not in variant_names:
            fail(f"held-out variant {v.name!r} needs held_out_of= one of its public variants")
    if not s.baselines or s.baselines[0] != s.reference:
        fail(f"baselines must start with its reference {s.reference!r}")
    if s.contrasts and s.contrasts[0] != s.reference:
        fail(f"contrasts must start with its reference {s.reference!r}")
    curve_names = [c.name for c in s.curves]
    if len(set(curve_names)) != len(curve_names):
        fail("curve names repeat")
    for c in s.curves:
        if c.x_values is not None and c.x_values not in curve_names:
            fail(f"curve {c.name!r} takes its x values from undeclared curve {c.x_values!r}")
    for sc in s.scatters:
        for m in (sc.x, sc.y):
            if m not in metric_names:
                fail(f"scatter plot of unknown metric {m!r}")
    for t in s.tracks:
        if not t.hooks or any(h not in s.hooks + s.lifts for h in t.hooks):
            fail(f"track {t.name!r} needs hooks of the suite's own, got {t.hooks}")
        for c in t.columns:
            if c not in metric_names:
                fail(f"track {t.name!r} shows undeclared metric {c!r}")
    if len({t.name for t in s.tracks}) != len(s.tracks):
        fail("track names repeat")
    for c in s.columns:
        if c not in metric_names or c == s.headline:
            fail(f"column {c!r} is not a declared metric other than the headline")
    if s.columns and s.tracks:
        fail("a suite with tracks declares its columns per track")
    if len(set(s.columns)) != len(s.columns):
        fail("columns repeat")
    if len({f.name for f in s.fixtures}) != len(s.fixtures):
        fail("fixture names repeat")
    for f in s.fixtures:
        if ":" not in f.builder:
            fail(f"fixture {f.name!r}: builder must be 'package.module:function'")
        try:
            json.dumps(dict(f.config), sort_keys=True)
        except (TypeError, ValueError):
            fail(f"fixture {f.name!r}: config must be JSON (it is hashed into the key)")
    if s.reliability is not None:
        r = s.reliability
        for c in (r.confidence, r.accuracy, r.count):
            if c not in curve_names:
                fail(f"reliability diagram of undeclared curve {c!r}")
    if s.heatmap is not None:
        _check_heatmap(s, s.heatmap, fail)
    if s.variant_axis is not None:
        key = s.variant_axis.key
        numeric = [v for v in s.variants if is_number(v.config.get(key))]
        if len(numeric) < 2:
            fail(f"variant axis {key!r} is numeric in fewer than two variants")
    for hook in s.hook_specs:
        if hook.name not in s.accepted_hooks:
            fail(f"declares hook {hook.name!r} but neither calls nor lifts it")
    for key, kind in s.train_info.items():
        if kind not in INFO_TYPES:
            fail(f"train_info field {key!r} has type {kind!r}; allowed: "
                 f"{', '.join(t.__name__ for t in INFO_TYPES)}")
    for package in s.shared_code:
        if not all(part.isidentifier() for part in package.split(".")):
            fail(f"shared_code {package!r} is not a package name")
    if not isinstance(s.pipeline, str) or ":" not in s.pipeline:
        fail("pipeline must be 'package.module:Class'")


def _check_heatmap(s: Suite, h: HeatmapSpec, fail: Any) -> None:
    """One colour scale for every column: declared metrics sharing a direction and a unit."""
    if not h.metrics or len(set(h.metrics)) != len(h.metrics):
        fail("heatmap needs distinct metrics")
    declared = {m.name: m for m in s.metrics}
    for name in h.metrics:
        if name not in declared:
            fail(f"heatmap of undeclared metric {name!r}")
    specs = [declared[n] for n in h.metrics]
    if len({m.better for m in specs}) > 1 or specs[0].better == "neither":
        fail(f"heatmap metrics need one direction (higher or lower is better), got "
             f"{', '.join(f'{m.name}: {m.better}' for m in specs)}")
    if len({m.unit for m in specs}) > 1:
        fail(f"heatmap metrics need one unit, got "
             f"{', '.join(f'{m.name}: {m.unit}' for m in specs)}")
    if h.variant is not None and h.variant not in {v.name for v in s.variants}:
        fail(f"heatmap of undeclared variant {h.variant!r}")


def _check_tuning(s: Suite, fail: Any) -> None:
    """A tuned protocol every objective can run: settings the suite has, numeric ranges
    that hold the suite's own value, at least the learning rate, a budget, a split."""
    from harness.objectives.search import SearchSpaceError, parse

    t = s.tuning
    try:
        dims = parse(t.space, what="tuning.space", defaults=dict(s.settings))
    except SearchSpaceError as exc:  # names outside the settings say so too
        fail(str(exc).replace("not a hyperparameter of this objective",
                              "not one of the suite's settings"))
    if "lr" not in t.space:
        fail("tuning.space must tune the learning rate ('lr') at least")
    if any(d.kind == "choice" for d in dims):
        fail("tuning.space: settings are tuned over ranges, not choices (members of one "
             "batched run share their optimizer kind)")
    if not isinstance(t.k, int) or isinstance(t.k, bool) or t.k < 2:
        fail(f"tuning.k is a budget of at least 2 trials, got {t.k!r}")
    if t.validation_share is None:
        if not t.validation:
            fail("tuning.validation must name the validation data when validation_share "
                 "is None (the suite's pipeline supplies it)")
    elif not 0 < t.validation_share < 0.5:
        fail(f"tuning.validation_share must lie in (0, 0.5), got {t.validation_share!r}")
    unknown = [h for h in t.hooks if h not in s.hooks]
    if unknown:
        fail(f"tuning.hooks: {', '.join(unknown)} not hooks of this suite")
    if not t.selection:
        fail("tuning.selection must say how a trial is chosen (the pages show it)")

