"""Checking submitted code: the engine's validator (:mod:`harness.objectives.validate`) run
on untrusted code in the sandbox, its report read back type-checked and size-limited."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contract import registry
from harness.objectives.loading import LoadedObjective
from harness.objectives.search import checked_space
from harness.objectives.validate import Validation
from harness.sandbox.process import Limits, Process

MAX_REPORT_BYTES = 1 << 20
# Checking code at submission: the validator's smoke batches take well under a second.
VALIDATION_LIMITS = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=4 << 30,
                           disk_bytes=64 << 20, output_bytes=64 << 10)


def validate_sandboxed(code: str, filename: str,
                       overrides: Mapping[str, Any] | None = None) -> Validation:
    """The engine's validator (:func:`harness.objectives.validate.validate`) on untrusted
    code, in the sandbox; the returned objective carries metadata only, no callable hook."""
    from harness.objectives.validate import Problem

    process = Process({"task": "validate", "overrides": dict(overrides or {})}, code,
                      filename, VALIDATION_LIMITS)
    try:
        while process.poll() is None and not process.watch():
            import time

            time.sleep(0.02)
        reason, error = process.explain()
        raw = {} if reason else _read_validation(process.workdir)
        if not reason and not raw:
            reason, error = "crash", "the validator ended without a report"
    finally:
        process.close()
    validation = Validation(filename)
    if reason:
        code_ = "sandbox" if reason != "objective" else "exception"
        validation.problems.append(Problem(code_, "error", process.scrub(error)))
        return validation
    validation.problems = [Problem(p["code"], p["severity"], process.scrub(p["message"]))
                           for p in raw.get("problems", [])]
    if "objective" in raw:
        validation.objective = _described_objective(raw["objective"], code, filename)
    return validation


def _read_validation(workdir: Path) -> dict[str, Any]:
    """The validator's problems and the objective's description, type-checked."""
    raw = _load_json(workdir / "result.json")
    problems = raw.get("problems")
    if not isinstance(problems, list):
        return {}
    clean = [{"code": str(p.get("code", ""))[:50], "severity":
              "warning" if p.get("severity") == "warning" else "error",
              "message": str(p.get("message", ""))[:5000]}
             for p in problems[:50] if isinstance(p, dict)]
    report: dict[str, Any] = {"problems": clean}
    o = raw.get("objective")
    if isinstance(o, dict) and isinstance(o.get("hooks"), list):
        hooks = registry.hooks()
        hp = o.get("hyperparameters") if isinstance(o.get("hyperparameters"), dict) else {}
        defaults = o.get("defaults") if isinstance(o.get("defaults"), dict) else {}
        context = o.get("context") if isinstance(o.get("context"), dict) else {}
        report["objective"] = {
            "name": str(o.get("name", ""))[:200],
            "description": str(o.get("description", ""))[:5000],
            "hooks": [h for h in o["hooks"] if h in hooks],
            "hyperparameters": {str(k): v for k, v in hp.items()
                                if isinstance(v, str | int | float | bool | None)},
            "defaults": {str(k): v for k, v in defaults.items()
                         if isinstance(v, str | int | float | bool | None)},
            "context": {str(k): tuple(str(n) for n in v) for k, v in context.items()
                        if k in hooks and isinstance(v, list)}}
        report["objective"]["search_space"] = checked_space(
            o.get("search_space"), report["objective"]["defaults"])
    return report


def _described_objective(o: Mapping[str, Any], code: str, filename: str) -> LoadedObjective:
    def not_here(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a submitted objective's hooks run only in the sandbox")

    return LoadedObjective(name=o["name"], origin="file", source=code,
                           hooks={h: not_here for h in o["hooks"]}, defaults=o["defaults"],
                           hyperparameters=o["hyperparameters"], description=o["description"],
                           path=filename, context=o["context"],
                           search_space=o.get("search_space", {}))


def _load_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file the child wrote, its size checked before it is read."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
            return {}
        raw = json.loads(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable, malformed or nested past the recursion limit
        return {}
    return raw if isinstance(raw, dict) else {}
