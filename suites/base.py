"""What every suite declares, as data. Importing this never imports torch."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class MetricSpec:
    name: str
    label: str
    higher_is_better: bool = True
    description: str = ""
    percent: bool = False
    short: str = ""  # column header


@dataclass(frozen=True)
class Variant:
    """One configuration of a suite (dataset × condition)."""

    name: str
    config: Mapping[str, Any]
    description: str
    default: bool = True  # part of the default run (real-data variants are opt-in)
    queue: str = "cpu"

    def config_hash(self, suite: Suite) -> str:
        payload = {"suite": suite.name, "version": suite.version, "variant": self.name,
                   "config": dict(self.config), "protocol": dict(suite.protocol)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


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
}


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
    disk_mb: int = 512
    output_kb: int = 64

    def wall_seconds(self, members: int) -> float:
        import os

        scale = float(os.environ.get("HARNESS_TIME_SCALE", "1") or 1)
        return scale * (self.base_seconds + self.seconds_per_member * max(members, 1))


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
    info: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # a key of REASONS when status is failed/timeout/killed
    output: str = ""  # the sandboxed child's stdout/stderr, truncated: the owner's only


@dataclass(frozen=True)
class Suite:
    name: str
    version: str
    hook: str
    description: str
    headline: str
    metrics: tuple[MetricSpec, ...]
    variants: tuple[Variant, ...]
    runner: str  # the protocol module (prepare/train/judge), imported only when cells run
    reference: str = "ce"
    protocol: Mapping[str, Any] = field(default_factory=dict)
    resources: Resources = Resources()

    def queue_for(self, variants: Iterable[str]) -> str:
        """``gpu`` when any of the variants needs it, else ``cpu``."""
        return "gpu" if any(self.variant(v).queue == "gpu" for v in variants) else "cpu"

    @property
    def accepted_hooks(self) -> tuple[str, ...]:
        """The suite's hook and those it lifts into it (the hook spec's ``lifted_from``)."""
        from harness.objectives.spec import HOOKS

        return (self.hook, *getattr(HOOKS.get(self.hook), "lifted_from", ()))

    def supports(self, hooks: Iterable[str]) -> bool:
        """Whether an objective defining ``hooks`` can be run by this suite."""
        return bool(set(self.accepted_hooks) & set(hooks))

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        names = ", ".join(v.name for v in self.variants)
        raise KeyError(f"suite {self.name!r} has no variant {name!r} (variants: {names})")

    @property
    def default_variants(self) -> list[str]:
        return [v.name for v in self.variants if v.default]

    def shortened(self, epochs: int) -> Suite:
        """The same suite trained for ``epochs``: a different version, so smoke-run
        results are stored apart and never mix with the real protocol's."""
        return replace(self, version=f"{self.version}+e{epochs}",
                       protocol={**self.protocol, "epochs": epochs})

    def metric(self, name: str) -> MetricSpec:
        return next(m for m in self.metrics if m.name == name)

    def run_cells(self, objective: Any, variants: list[str], seeds: list[int],
                  **options: Any) -> list[CellResult]:
        """Train and judge every (variant, seed) cell for one objective."""
        from suites.jobs import run_in_process

        return run_in_process(self, objective, [self.variant(v) for v in variants], seeds,
                              **options)
