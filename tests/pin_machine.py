"""Pin the per-seed results of tests/data/pinned_results.json on THIS machine's kind of CPU.

Float reductions take different paths on different instruction sets (AVX2, AVX-512,
AMX), and 100 epochs amplify a last-bit difference into different weights, so pinned
numbers hold bit for bit only on the kind of CPU they were computed on. This recomputes
every pinned cell with the code checked out here and records it under this machine's
fingerprint (:func:`fingerprint`); tests/engine/test_pinned_results.py compares against the set
of the machine it runs on. Run it from a checkout of the commit whose numbers are to be
pinned (e.g. the last commit before a refactoring), never to paper over a change:

    .venv/bin/python tests/pin_machine.py

An AVX-512 machine computes an AVX2 machine's numbers of the same vendor when torch and
MKL are held to AVX2 (checked: the AMD AVX2 set, recomputed bit for bit on an AMD EPYC
with AVX-512); the fingerprint still reads the CPU's flags, so write that set's key by hand:

    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 .venv/bin/python tests/pin_machine.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.runner.inprocess import run_cells

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data"
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
         "avx_vnni")


def fingerprint() -> str:
    """The CPU's vendor (the math libraries take other kernels on AMD than on Intel with
    the same flags: an AMD EPYC with AVX2 computes other last bits than the Intel AVX2
    machine of the original set), torch's CPU capability and the instruction-set flags
    the math libraries dispatch on."""
    import torch

    def field(name: str) -> str:
        try:
            return next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                        if line.startswith(name)).split(":", 1)[1]
        except (OSError, StopIteration):
            return ""

    flags = set(field("flags").split())
    return "+".join([field("vendor_id").strip() or "unknown",
                     torch.backends.cpu.get_cpu_capability().lower(),
                     *(f for f in FLAGS if f in flags)])


def groups(cells: list[dict]) -> list[tuple[str, int | None, str]]:
    """The (suite, epochs, objective) runs the pinned cells come from, in file order."""
    return list(dict.fromkeys((c["suite"], c["epochs"], c["objective"]) for c in cells))


def rerun(cells: list[dict], suite_name: str, epochs: int | None,
          objective: str) -> list[tuple[dict, object]]:
    """Each pinned cell of one run with the result today's code computes for it."""
    from harness.contract.registry import get_suite
    from harness.objectives.loading import load_objective

    expected = [c for c in cells
                if (c["suite"], c["epochs"], c["objective"]) == (suite_name, epochs, objective)]
    suite = get_suite(suite_name)
    if epochs:
        suite = suite.shortened(epochs)
    spec = str(DATA / f"{objective}.py") if (DATA / f"{objective}.py").exists() else objective
    variants = list(dict.fromkeys(c["variant"] for c in expected))
    seeds = sorted({c["seed"] for c in expected})
    got = {(r.variant, r.seed): r for r in
           run_cells(suite, load_objective(spec), variants, seeds)}
    return [(c, got[(c["variant"], c["seed"])]) for c in expected]


def main() -> None:
    import subprocess

    import torch

    torch.set_num_threads(1)
    pinned = json.loads((DATA / "pinned_results.json").read_text())
    out = []
    for suite_name, epochs, objective in groups(pinned["cells"]):
        for c, r in rerun(pinned["cells"], suite_name, epochs, objective):
            out.append({**c, "status": r.status, "metrics": r.metrics, "curves": r.curves,
                        "mode": r.info.get("mode")})
        print(suite_name, epochs, objective, "done", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    machines = pinned.setdefault("machines", {})
    machines[fingerprint()] = {"commit": commit, "cells": out}
    (DATA / "pinned_results.json").write_text(json.dumps(pinned, indent=1) + "\n")
    print(f"pinned {len(out)} cells for {fingerprint()} at {commit}")


if __name__ == "__main__":
    main()
