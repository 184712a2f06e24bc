"""Line and branch coverage per package, from the data `make coverage` collected.

    python scripts/coverage_by_package.py [coverage.json]

Without an argument it asks coverage.py for a JSON report of the combined data first.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


def by_package(report: dict) -> dict[str, list[int]]:
    """package -> [covered lines, lines, covered branches, branches]."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path, entry in report["files"].items():
        s, t = entry["summary"], totals[Path(path).parts[0]]
        t[0] += s["covered_lines"]
        t[1] += s["num_statements"]
        t[2] += s.get("covered_branches", 0)
        t[3] += s.get("num_branches", 0)
    return dict(sorted(totals.items()))


def main(argv: list[str]) -> int:
    if argv:
        report = json.loads(Path(argv[0]).read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "coverage.json"
            subprocess.run([sys.executable, "-m", "coverage", "json", "-q", "-o", str(out)],
                           check=True)
            report = json.loads(out.read_text())
    rows = by_package(report)
    rows["all"] = [sum(r[i] for r in rows.values()) for i in range(4)]
    print(f"{'package':<8} {'lines':>17} {'branches':>17}")
    for name, (cl, nl, cb, nb) in rows.items():
        print(f"{name:<8} {cl:>6}/{nl:<6} {100 * cl / max(nl, 1):5.1f}% "
              f"{cb:>5}/{nb:<5} {100 * cb / max(nb, 1):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
