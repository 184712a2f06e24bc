"""The end of `make test`: the slowest tests of its pytest runs and the wall time of each.

    python scripts/test_times.py [--top 15] RUN.xml:SECONDS [RUN.xml:SECONDS ...]

Each argument is a run's JUnit report (``pytest --junitxml``, whose ``time`` per test is
setup + call + teardown) and the run's wall time in seconds, as scripts/test.sh measured
it. The slowest tests are ranked across the runs, so that a test that got slower shows up
whichever group it runs in.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def test_times(report: Path) -> list[tuple[float, str]]:
    """(seconds, test id) of every test case in a JUnit report; a missing report (pytest
    failed before writing it) has none."""
    if not report.exists():
        return []
    cases = ET.parse(report).getroot().iter("testcase")
    return [(float(c.get("time", 0)), f"{c.get('classname', '')}::{c.get('name', '')}")
            for c in cases]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN.xml:SECONDS")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    times, walls = [], []
    for run in args.runs:
        path, _, seconds = run.rpartition(":")
        cases = test_times(Path(path))
        times += cases
        walls.append((Path(path).stem, float(seconds), len(cases)))
    times.sort(reverse=True)
    print(f"\n{args.top} slowest tests (setup + call + teardown):")
    for seconds, name in times[:args.top]:
        print(f"{seconds:8.1f} s  {name}")
    summed = sum(s for s, _ in times)
    print("\nwall time:", ", ".join(f"{name} {wall:.0f} s ({n} tests)" for name, wall, n in walls))
    total = sum(w for _, w, _ in walls)
    print(f"pytest in all: {total:.0f} s = {total / 60:.1f} min wall, {summed:.0f} s of tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
