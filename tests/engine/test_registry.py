"""The suite contract fails loudly: a declaration shared code could not work with is an
error when the suite is declared or registered, never a silent gap on some page."""

from __future__ import annotations

import textwrap

import pytest

from harness.contract import registry
from harness.contract.suite import (
    Anchors,
    Axis,
    CurveSpec,
    MetricSpec,
    ScatterSpec,
    Suite,
    SuiteError,
    Variant,
    VariantAxis,
    format_value,
)
from harness.objectives.spec import HookSpec

HEAD = MetricSpec("err", "error", better="lower", decimals=3)


def _suite(**changes) -> Suite:
    fields = dict(name="t", version="1", description="d", hooks=("classification_loss",),
                  headline="err", metrics=(HEAD,), anchors={"err": Anchors(1.0, 0.0)},
                  variants=(Variant("a", {"x": 0.0}, ""), Variant("b", {"x": 1.0}, "")),
                  pipeline="m:C", baselines=("ce",))
    return Suite(**{**fields, **changes})


@pytest.mark.parametrize("changes,message", [
    ({"anchors": {}}, "no normalization anchors for its headline 'err'"),
    ({"anchors": {"err": Anchors(0.0, 1.0)}}, "point the wrong way for a lower-is-better"),
    ({"headline": "acc"}, "headline 'acc' is not one of its metrics"),
    ({"metrics": (MetricSpec("err", "e", better="neither"),)}, "needs a direction"),
    ({"hooks": ()}, "declares no hook"),
    ({"baselines": ("gce", "ce")}, "baselines must start with its reference 'ce'"),
    ({"curves": (CurveSpec("v", "v", Axis("ε"), x_values="grid"),)},
     "x values from undeclared curve 'grid'"),
    ({"scatters": (ScatterSpec("err", "acc"),)}, "scatter plot of unknown metric 'acc'"),
    ({"variant_axis": VariantAxis("rate", "r")}, "numeric in fewer than two variants"),
    ({"variants": (Variant("a", {}, ""), Variant("a", {}, ""))}, "distinct names"),
    ({"train_info": {"x": list}}, "train_info field 'x' has type"),
    ({"pipeline": "module.Class"}, "pipeline must be 'package.module:Class'"),
    ({"hook_specs": (HookSpec("other_loss", ("x",), "", "m:f"),)},
     "declares hook 'other_loss' but neither calls nor lifts it"),
    ({"seed_streams": {"init": "i", "augment": "a"}}, "seed_streams must name .* not: augment"),
    ({"seed_streams": {"init": "i"}}, "not: one stream alone"),
])
def test_an_incomplete_declaration_fails_when_declared(changes, message):
    with pytest.raises(SuiteError, match=message):
        _suite(**changes)


def test_metric_formats_follow_the_unit():
    assert format_value(0.7319, "percent", 1) == "73.2"
    assert format_value(-0.0123, "percent", 1, signed=True) == "−1.2"
    assert format_value(0.00049, "percent", 1, signed=True) == "±0.0"
    assert format_value(0.04213, "number", 3) == "0.042"
    assert format_value(0.04213, "number", 3, signed=True) == "+0.042"
    assert format_value(0.000123, "pvalue", 3) == "1.23e-04"
    assert format_value(0.5, "probability", 2) == "0.50"
    assert format_value(float("nan"), "number", 3) == "–"
    assert format_value(None, "percent", 1) == "–"
    spec = MetricSpec("ece", "ECE", better="lower")
    assert spec.improvement(0.05, 0.08) == pytest.approx(0.03)  # lower is better
    assert MetricSpec("acc", "acc").improvement(0.9, 0.8) == pytest.approx(0.1)
    assert Anchors(worst=0.2, best=0.0).normalize(0.05) == pytest.approx(0.75)


def _package(tmp_path, monkeypatch, name: str, init: str, baselines: dict | None = None):
    folder = tmp_path / name
    (folder / "baselines").mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(init))
    for file, text in (baselines or {}).items():
        (folder / "baselines" / file).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_SUITES", name)


DECLARATION = """
    from harness.contract.suite import Anchors, MetricSpec, Suite, Variant
    SUITE = Suite(name={name!r}, version="1", description="d", hooks={hooks!r},
                  headline="acc", metrics=(MetricSpec("acc", "accuracy"),),
                  anchors={{"acc": Anchors(0.0, 1.0)}}, variants=(Variant("v", {{}}, ""),),
                  pipeline="x:Y", baselines={baselines!r})
"""


@pytest.mark.parametrize("name,hooks,baselines,files,message", [
    ("dup_suite", ("classification_loss",), ("ce",), {}, "two packages declare suite"),
    ("nohook_suite", ("mystery_loss",), ("ce",), {}, "uses hook 'mystery_loss', which no"),
    ("nobase_suite", ("classification_loss",), ("ce", "nothere"), {},
     "baseline 'nothere' is not a built-in objective"),
    ("dupbase_suite", ("classification_loss",), ("ce",),
     {"gce.py": "def classification_loss(logits, targets):\n    return logits.sum()\n"},
     "two built-in objectives are named 'gce'"),
    ("wronghook_suite", ("classification_loss",), ("ce", "other"),
     {"other.py": "def certified_loss(logits, worst_logits, targets):\n"
                  "    return logits.sum()\n"},
     "baseline 'other' defines none of classification_loss"),
])
def test_a_registration_mistake_fails_loudly(tmp_path, monkeypatch, name, hooks, baselines,
                                             files, message):
    suite_name = "noisy-labels" if name == "dup_suite" else name.replace("_", "-")
    _package(tmp_path, monkeypatch, name,
             DECLARATION.format(name=suite_name, hooks=hooks, baselines=baselines), files)
    with pytest.raises(SuiteError, match=message):
        registry.suite_names()


def test_a_package_without_a_suite_is_refused(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "empty_suite", "X = 1\n")
    with pytest.raises(SuiteError, match="empty_suite defines no SUITE"):
        registry.all_suites()


def test_the_pipeline_must_implement_the_contract(tmp_path, monkeypatch):
    declaration = textwrap.dedent(DECLARATION.format(
        name="half", hooks=("classification_loss",), baselines=("ce",)))
    _package(tmp_path, monkeypatch, "half_suite",
             declaration.replace('"x:Y"', '"half_suite:Half"') + textwrap.dedent("""
                 from harness.contract.pipeline import Pipeline
                 class Half(Pipeline):
                     def prepare(self, suite, variants, seeds, **kw):
                         return []
             """))
    suite = registry.get_suite("half")
    with pytest.raises(TypeError, match="abstract methods judge, train"):
        registry.pipeline(suite)


def test_suite_versions_and_shortened_runs():
    suite = registry.get_suite("noisy-labels")
    short = registry.suite_at("noisy-labels", "1.0+e3")
    assert short.version == "1.0+e3" and short.settings["epochs"] == 3
    assert short.base_version == "1.0"
    with pytest.raises(LookupError, match="no longer available"):
        registry.suite_at("noisy-labels", "0.9")
    assert suite.supports({"classification_loss"})
    assert not suite.supports({"certified_loss"})
    assert registry.get_suite("certified").supports({"classification_loss"})
