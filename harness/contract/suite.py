"""Over 500 lines on purpose: the whole declaration a suite makes, in the one module a
suite author reads (docs/suite-contract.md describes it field by field).

What a suite declares, as typed data: everything shared code needs to know about it.

A suite package (see ``docs/adding-a-suite.md``) defines one :class:`Suite` named
``SUITE`` in its ``__init__.py`` and a :class:`harness.contract.pipeline.Pipeline` that prepares,
trains and judges its cells. Shared code (the CLI, the sandbox, the web pages, the API,
the exports, the workers) reads only these declarations; nothing outside a suite's
folder names the suite. A declaration that is incomplete or inconsistent raises
:class:`SuiteError` when the suite is constructed, i.e. when its package is imported.

Importing this module never imports numpy or torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from harness.objectives.spec import HookSpec


class SuiteError(ValueError):
    """A suite declaration that shared code could not work with (raised at import)."""


# --- metrics --------------------------------------------------------------------------

Unit = Literal["percent", "probability", "pvalue", "number"]
UNITS = ("percent", "probability", "pvalue", "number")


@dataclass(frozen=True)
class MetricSpec:
    """One metric a suite's judge computes, with its direction and how it is shown.

    ``better``: ``higher``, ``lower``, or ``neither`` for a metric that only describes a
    cell (the realized noise rate, the best epoch): shown, never ranked or compared.
    ``unit``: ``percent`` (a share stored in [0, 1], shown ×100 with ``decimals``,
    differences in percentage points), ``probability`` (a value in [0, 1] shown as is),
    ``pvalue`` (shown in scientific notation), ``number`` (shown with ``decimals``).
    """

    name: str
    label: str
    better: Literal["higher", "lower", "neither"] = "higher"
    unit: Unit = "number"
    decimals: int = 3
    short: str = ""  # column header
    description: str = ""

    def __post_init__(self) -> None:
        if self.better not in ("higher", "lower", "neither"):
            raise SuiteError(f"metric {self.name}: better must be 'higher', 'lower' or "
                             f"'neither'")
        if self.unit not in UNITS:
            raise SuiteError(f"metric {self.name}: unit must be one of {', '.join(UNITS)}")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    @property
    def percent(self) -> bool:
        return self.unit == "percent"

    @property
    def header(self) -> str:
        return self.short or self.name

    def improvement(self, value: float, reference: float) -> float:
        """``value`` relative to ``reference``, positive when ``value`` is better."""
        return value - reference if self.higher_is_better else reference - value

    def format(self, value: float | None) -> str:
        """The value as every table shows it (``–`` for a missing one)."""
        return format_value(value, self.unit, self.decimals)

    def format_delta(self, value: float | None) -> str:
        """A signed improvement (positive = better), in percentage points for percents."""
        return format_value(value, self.unit, self.decimals, signed=True)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "short": self.header,
                "better": self.better, "higher_is_better": self.higher_is_better,
                "unit": self.unit, "percent": self.percent, "decimals": self.decimals,
                "description": self.description}


def format_value(value: float | None, unit: str, decimals: int, *, signed: bool = False) -> str:
    """One formatting rule for the CLI, the pages and the exports (the plots of
    :mod:`harness.report.figures` draw a percent ×100 by the same rule, with these decimals in
    their hover text)."""
    if not is_number(value):
        return "–"
    sign = "+" if signed else ""
    if unit == "percent":
        text = f"{100 * value:{sign}.{decimals}f}"
    elif unit == "pvalue":
        text = f"{value:{sign}.{max(decimals - 1, 1)}e}"
    else:
        text = f"{value:{sign}.{decimals}f}"
    if signed and text.lstrip("+-").strip("0.") in ("", "e+00", "e-00"):
        return "±" + text.lstrip("+-")
    return text.replace("-", "−") if signed else text


@dataclass(frozen=True)
class Anchors:
    """Where the headline's normalized score is 0 (``worst``) and 1 (``best``).

    Fixed per suite version, never taken from the submitted population, so that a new
    submission changes nobody else's score. ``best < worst`` for lower-is-better metrics.
    """

    worst: float
    best: float

    def normalize(self, value: float) -> float:
        return (value - self.worst) / (self.best - self.worst)


# --- plots ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """An x axis: what a curve's points are indexed by."""

    label: str  # "epoch", "ε", "severity", "batch", "unlearning step"
    unit: str = ""
    # categories in place of numbers: point k (1, 2, …) is named ticks[k - 1] ("unlearned",
    # "relearned", "4-bit"); a curve on such an axis has one point per tick
    ticks: tuple[str, ...] = ()


EPOCH = Axis("epoch")


@dataclass(frozen=True)
class CurveSpec:
    """A per-seed series the judge stores, drawn against its own x axis.

    Without ``x_values`` the points sit at 1, 2, …, n of ``x`` (epochs, batches, steps);
    with it, the x values are the stored curve of that name (an ε grid, severities),
    which is itself declared with ``drawn=False``.
    """

    name: str
    label: str
    x: Axis = EPOCH
    unit: Unit = "number"
    decimals: int = 3
    log: bool = False  # a log y axis (gradient norms)
    x_values: str | None = None
    drawn: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "x_label": self.x.label,
                "x_unit": self.x.unit, "x_ticks": list(self.x.ticks), "unit": self.unit,
                "decimals": self.decimals, "log": self.log, "x_values": self.x_values,
                "drawn": self.drawn}


@dataclass(frozen=True)
class ScatterSpec:
    """Per-seed (x, y) pairs of two metrics, in the metrics' own units."""

    x: str
    y: str


@dataclass(frozen=True)
class ReliabilitySpec:
    """A reliability diagram from three stored per-seed curves over confidence bins:
    mean confidence, accuracy and the number of samples of each bin."""

    confidence: str
    accuracy: str
    count: str
    label: str = "reliability diagram"


@dataclass(frozen=True)
class HeatmapSpec:
    """Objectives × metrics, the mean over seeds of each metric in one variant: e.g. the
    error per corruption of each method."""

    metrics: tuple[str, ...]
    label: str
    variant: str | None = None  # the variant drawn; None = the page's current variant


@dataclass(frozen=True)
class Track:
    """A part of a suite's board for the objectives that define one of ``hooks`` (e.g.
    training objectives vs post-hoc calibrators): tables show each track apart, the
    reference in every one, with ``columns`` beside the headline. The judge names a cell's
    track in its ``info["track"]``."""

    name: str
    label: str
    hooks: tuple[str, ...]
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tuning:
    """The suite's tuned protocol (``harness run suite NAME --tuned``): the training
    settings tuned for every objective, the reference included, as ranges in the form of
    an objective's ``SEARCH_SPACE`` (:mod:`harness.objectives.search`); ``k`` trials from
    the one quasi-random sampler (settings first, the objective's hyperparameters after,
    ``seed`` fixing the scrambling); the validation split trials are chosen on, drawn from
    the variant's training data (``validation_share`` of it, with the labels a practitioner
    has: noisy ones under label noise), never the test set, or, with ``validation_share``
    None, validation data of the suite's own that ``validation`` names (tta: corruptions
    the benchmark never streams); ``selection`` says in words how a trial is chosen, for
    the pages; ``metric`` the metric it is chosen by, measured on the validation data (the
    headline when empty); ``search_seeds`` the seeds each trial trains (a whole member
    chunk), apart from the final evaluation's; ``hooks`` the hooks an objective needs for
    the protocol to have something to tune (empty: the suite's training hook and those it
    lifts). A search's pipeline sees ``settings["searching"] = True``."""

    space: Mapping[str, Mapping[str, Any]]
    k: int = 8
    validation_share: float | None = 0.1
    selection: str = ""
    seed: int = 0
    metric: str = ""
    search_seeds: tuple[int, ...] = (1000, 1001, 1002, 1003, 1004)
    validation: str = ""
    hooks: tuple[str, ...] = ()

    @property
    def validation_text(self) -> str:
        """What trials are judged on, in words (the pages, the CLI, the form)."""
        if self.validation:
            return self.validation
        return (f"a validation split ({self.validation_share:.0%}) drawn from the training "
                f"data")

    @property
    def search_members(self) -> int:
        """Members the search trains per (objective, variant): k trials × search seeds."""
        return self.k * len(self.search_seeds)

    def dimensions(self) -> tuple[Any, ...]:
        from harness.objectives.search import parse

        return parse(self.space, what="Tuning.space")


@dataclass(frozen=True)
class VariantAxis:
    """How variants line up for the headline-across-variants plot: the numeric variant
    config key on the x axis (noise rate, ε, severity) and its label."""

    key: str
    label: str
    unit: str = ""


# --- fixtures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    """Arrays the trusted side builds once per seed (a source model, a target model) and
    every objective and worker reuses: ``builder`` is ``"module:function"``, called as
    ``builder(config, seed) -> dict of numpy arrays``; ``code`` names more modules whose
    source the entry depends on (the model's). Stored content-addressed by
    :mod:`harness.data.fixtures`, checked on every read, rebuilt when a check fails."""

    name: str
    builder: str
    config: Mapping[str, Any] = field(default_factory=dict)
    code: tuple[str, ...] = ()


# --- variants and resources -----------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One configuration of a suite (dataset × condition)."""

    name: str
    config: Mapping[str, Any]
    description: str
    default: bool = True  # part of the default run (real-data variants are opt-in)
    queue: str = "cpu"
    # A held-out variant (declared in Suite.held_out) names its public twin: the same
    # protocol, with part of it drawn from the server's secret (harness.contract.heldout).
    held_out_of: str = ""

    def config_hash(self, suite: Suite) -> str:
        payload = {"suite": suite.name, "version": suite.version, "variant": self.name,
                   "config": dict(self.config), "settings": dict(suite.settings)}
        if self.held_out_of:  # the draws are the secret's: a rotated one is another variant
            from harness.contract import heldout
            payload["secret"] = heldout.fingerprint()
        from harness.contract import draws

        if draws.keyed():  # every stream drawn from a key: results under another are apart
            payload["draws"] = draws.fingerprint()
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Resources:
    """A suite's per-run budget: the sandbox's limits and the worker's time limits.

    A run trains ``members`` = variants × seeds together; its wall budget is
    ``base_seconds + seconds_per_member * members`` (scaled by ``HARNESS_TIME_SCALE``
    on slower machines), the CPU budget that times the cores it may use.
    """

    base_seconds: float = 120.0
    seconds_per_member: float = 30.0
    memory_mb: int = 16_384  # address space; torch's CUDA build maps several GB at import
    # every page a run's sandboxed processes hold together, their tmpfs work directories
    # included (one memory cgroup over theirs); each of them alone at most this too
    job_memory_mb: int = 4096
    disk_mb: int = 512
    output_kb: int = 64

    def wall_seconds(self, members: int) -> float:
        scale = float(os.environ.get("HARNESS_TIME_SCALE", "1") or 1)
        return scale * (self.base_seconds + self.seconds_per_member * max(members, 1))


# Why a cell did not finish ``ok``/``diverged``: typed, so pages and retries can act on it.
REASONS = {
    "objective": "the objective raised an exception",
    "memory": "ran out of memory (address-space limit)",
    "cpu": "ran past its CPU-time limit",
    "wall": "ran past its wall-clock limit",
    "disk": "wrote more than its disk quota",
    "output": "printed more than the output limit",
    "violation": "sandbox violation (a forbidden file, network or process access)",
    "invalid-output": "returned weights or predictions of the wrong format",
    "crash": "the sandboxed process died without a result",
    "infrastructure": "an error outside the objective (worker, broker or database)",
    "cancelled": "its run was cancelled (by its owner or staff) before it finished",
}


@dataclass
class CellResult:
    """A cell's outcome as the trusted judge computed it."""

    variant: str
    seed: int
    status: str  # ok | diverged | failed | timeout | killed
    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)
    diverged_step: int | None = None
    error: str = ""
    wall_time: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # how the cell ran (mode, sandbox)
    reason: str = ""  # a key of REASONS when status is failed/timeout/killed
    captured: str = ""  # the sandboxed child's stdout/stderr, truncated: the owner's only


# Types a suite may declare for the fields of its trainer's info that its judge reads
# (the sandbox keeps only declared fields, of these types, from the untrusted child).
INFO_TYPES = (str, bool, int, float, dict)


# --- the suite ------------------------------------------------------------------------


@dataclass(frozen=True)
class Suite:
    """A standardized evaluation. See ``docs/suite-contract.md`` for every field.

    ``hooks`` are the objective hooks the suite calls itself, ``lifts`` the hooks it
    can lift into them (a robust-training suite may lift ``classification_loss``); an objective
    runs on the suite when it defines any of both. ``hook_specs`` declare hooks this
    suite introduces. ``baselines`` are the suite's own built-in objectives (its default
    run, reference first); ``pipeline`` is ``"module:Class"`` of its
    :class:`harness.contract.pipeline.Pipeline`, imported only when cells run.
    """

    name: str
    version: str
    description: str
    hooks: tuple[str, ...]
    headline: str
    metrics: tuple[MetricSpec, ...]
    anchors: Mapping[str, Anchors]
    variants: tuple[Variant, ...]
    pipeline: str
    baselines: tuple[str, ...]
    reference: str = "ce"
    lifts: tuple[str, ...] = ()
    hook_specs: tuple[HookSpec, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    curves: tuple[CurveSpec, ...] = ()
    scatters: tuple[ScatterSpec, ...] = ()
    reliability: ReliabilitySpec | None = None
    variant_axis: VariantAxis | None = None
    train_info: Mapping[str, type] = field(default_factory=dict)
    resources: Resources = Resources()
    tracks: tuple[Track, ...] = ()
    fixtures: tuple[Fixture, ...] = ()
    heatmap: HeatmapSpec | None = None
    columns: tuple[str, ...] = ()  # beside the headline in tables; () = every metric
    # Packages outside the suite's own folder that its code imports (code two suites share,
    # e.g. ``suites.unlearning``): the sandbox makes them readable as it does the folder.
    shared_code: tuple[str, ...] = ()
    # Below this many seeds a row shows its values only: no interval, no verdict (the t
    # interval of 2 seeds is mean ± 12.7·s/√2; harness/report/stats.py).
    min_seeds: int = 3
    # The common set the cross-suite rank compares objectives on (default variants only;
    # () = every default variant): an objective is ranked once it has min_seeds seeds on
    # each, provisional before.
    ranked: tuple[str, ...] = ()
    # What ``harness demo`` runs on the ranked variants: the reference first, then the
    # built-in objectives whose contrast the suite's literature is about; () = the suite is
    # left to the full sweep (``harness demo --full``).
    contrasts: tuple[str, ...] = ()
    # The seed streams (``harness.contract.seeding.FACTORS``) the suite's randomness comes from,
    # each with what it draws: a factorial run (``harness run --factorial``) varies them
    # one at a time. Only a suite whose every draw goes through ``harness.contract.seeding`` may
    # declare them; () = no factorial runs.
    seed_streams: Mapping[str, str] = field(default_factory=dict)
    # Variants drawn from the server's secret (harness.contract.heldout): on no public list, run for
    # every ranked submission, shown beside their public twin (Variant.held_out_of).
    held_out: tuple[Variant, ...] = ()
    # The tuned protocol (Tuning): None = the suite runs at the objectives' defaults only.
    tuning: Tuning | None = None
    # Seeds per canonical member chunk: seed s of a variant always trains in chunk s // chunk,
    # beside the same seeds, so that its numbers do not depend on what else was asked for
    # (harness/contract/chunks.py, docs/reproducibility.md). Part of the protocol: changing it moves
    # numbers, so it changes with the suite's version. 5 = the default run's seeds; 1 where
    # stacking gains nothing.
    chunk: int = 5

    def __post_init__(self) -> None:
        from harness.contract.checks import check

        check(self)

    @property
    def table_columns(self) -> tuple[str, ...]:
        """The metrics a table shows beside the headline: the declared ``columns`` (the
        tracks' when there are tracks), else every other metric."""
        if self.tracks:
            return tuple(dict.fromkeys(c for t in self.tracks for c in t.columns))
        return self.columns or tuple(m.name for m in self.metrics if m.name != self.headline)

    # --- hooks ---

    @property
    def accepted_hooks(self) -> tuple[str, ...]:
        return (*self.hooks, *self.lifts)

    def supports(self, hooks: Iterable[str]) -> bool:
        """Whether an objective defining ``hooks`` can be run by this suite."""
        return bool(set(self.accepted_hooks) & set(hooks))

    @property
    def tunable_hooks(self) -> tuple[str, ...]:
        """The hooks the tuned protocol tunes: those ``Tuning.hooks`` names, else the
        suite's training hook and those it lifts (not a post-hoc map)."""
        named = self.tuning.hooks if self.tuning is not None else ()
        return named or (self.hooks[0], *self.lifts)

    def tunes(self, hooks: Iterable[str]) -> bool:
        """Whether the tuned protocol has something to tune for an objective defining
        ``hooks`` (one of :attr:`tunable_hooks`)."""
        return bool(set(self.tunable_hooks) & set(hooks))

    # --- variants ---

    def variant(self, name: str) -> Variant:
        """A public or held-out variant by name."""
        for v in (*self.variants, *self.held_out):
            if v.name == name:
                return v
        names = ", ".join(v.name for v in self.variants)
        raise KeyError(f"suite {self.name!r} has no variant {name!r} (variants: {names})")

    @property
    def default_variants(self) -> list[str]:
        return [v.name for v in self.variants if v.default]

    @property
    def ranked_variants(self) -> list[str]:
        """The variants every ranked objective has results on (``ranked`` or the defaults)."""
        return list(self.ranked) or self.default_variants

    def queue_for(self, variants: Iterable[str]) -> str:
        """``gpu`` when any of the variants needs it, else ``cpu``."""
        return "gpu" if any(self.variant(v).queue == "gpu" for v in variants) else "cpu"

    # --- metrics and plots ---

    def metric(self, name: str) -> MetricSpec:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"suite {self.name!r} has no metric {name!r}")

    @property
    def headline_metric(self) -> MetricSpec:
        return self.metric(self.headline)

    @property
    def headline_anchors(self) -> Anchors:
        return self.anchors[self.headline]

    def curve(self, name: str) -> CurveSpec:
        for c in self.curves:
            if c.name == name:
                return c
        raise KeyError(f"suite {self.name!r} declares no curve {name!r}")

    def fixture(self, name: str) -> Fixture:
        for f in self.fixtures:
            if f.name == name:
                return f
        raise KeyError(f"suite {self.name!r} declares no fixture {name!r}")

    # --- versions ---

    def shortened(self, epochs: int) -> Suite:
        """The same suite trained for ``epochs``: a different version, so smoke-run
        results are stored apart and never mix with the real protocol's."""
        return replace(self, version=f"{self.version}+e{epochs}",
                       settings={**self.settings, "epochs": epochs})

    @property
    def base_version(self) -> str:
        return self.version.split("+")[0]

    # The tuned protocol's versions (harness/tuning.py): results stored apart from the
    # defaults', each trial's search apart from the final evaluation.

    def tuned(self, settings: Mapping[str, Any] | None = None) -> Suite:
        """The final evaluation of the tuned protocol, ``V+tunedK``, trained with the chosen
        trial's ``settings`` (the suite's own when None: the version a table reads)."""
        k = self._tuning().k
        return replace(self, version=f"{self.version}+tuned{k}",
                       settings={**self.settings, **(settings or {})})

    def trial(self, index: int | None) -> Suite:
        """Trial ``index``'s search on the validation split, ``V+tunedK.tI`` (its settings
        are the sampler's); ``None``: the search of every trial batched at once, whose
        members bring their own settings."""
        from harness.objectives.search import trials

        t = self._tuning()
        settings = {**self.settings, "searching": True}
        if t.validation_share is not None:
            settings["validation_share"] = t.validation_share
        if index is None:
            return replace(self, version=f"{self.version}+tuned{t.k}.search", settings=settings)
        if not 0 <= index < t.k:
            raise ValueError(f"trial {index} of a budget of {t.k}")
        chosen = trials(t.dimensions(), (), t.k, t.seed)[index][0]
        return replace(self, version=f"{self.version}+tuned{t.k}.t{index}",
                       settings={**settings, **chosen})

    @property
    def track(self) -> str:
        """Which protocol this version's results follow: "defaults" (each objective at its
        author's hyperparameters, the suite's settings), "tuned at k=K" or, for a trial's
        search on the validation split, "tuned at k=K, trial I (validation)"."""
        match = re.search(r"\+tuned(\d+)(?:\.t(\d+))?$", self.version)
        if match is None:
            return "defaults"
        trial = f", trial {match[2]} (validation)" if match[2] is not None else ""
        return f"tuned at k={match[1]}{trial}"

    def _tuning(self) -> Tuning:
        if self.tuning is None:
            raise SuiteError(f"suite {self.name!r} has no tuned protocol")
        return self.tuning



def is_number(x: Any) -> bool:
    """A finite real number (not a bool, not NaN or ±inf, not an integer too big for a
    float)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an integer literal no float holds
        return False
