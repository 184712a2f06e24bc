"""``harness profile`` and ``harness.api.profile`` end to end: a loss never seen before,
profiled on two suites in one smoke run (``--epochs 1``, 3 seeds), then the same numbers
from the Python API and the human-readable table, reusing the stored cells."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from tests.client.test_cli import CLI, IN_PROCESS, strict_json
from tests.conftest import cli_environment

LOSS = '''
"""Cross-entropy clipped at tau nats: a loss no suite has seen."""

import torch.nn.functional as F


def classification_loss(logits, targets, *, tau: float = 2.0):
    return F.cross_entropy(logits, targets, reduction="none").clamp(max=tau)
'''
SUITES = ["noisy-labels", "calibration"]
API = textwrap.dedent("""
    import json, sys
    from harness import api
    from harness.report.jsonsafe import finite_or_none
    p = api.profile("clipped.py", suites={suites!r}, seeds=3, epochs=1, progress=False)
    frame, fig = p.to_pandas(), p.figure()
    print(json.dumps({{"payload": finite_or_none(p.to_json()), "frame": list(frame["suite"]),
                      "panels": sorted(k for k in fig.layout.to_plotly_json()
                                       if k.startswith("xaxis"))}}))
""")


def test_profile_cli_api_and_table_agree(tmp_path: Path):
    env = cli_environment(tmp_path / "home")
    (tmp_path / "clipped.py").write_text(LOSS)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    first = run(*CLI, "profile", "clipped.py", "--suites", *SUITES, "--epochs", "1",
                "--seeds", "3", "--json", *IN_PROCESS)
    assert first.returncode == 0, first.stderr
    found = strict_json(first.stdout)
    assert [s["suite"] for s in found["suites"]] == SUITES and found["label"] == "clipped"
    for s in found["suites"]:
        assert s["status"] == "scored" and s["reference"] == "ce" and s["of"] == 2
        assert s["verdict"] in ("better", "worse", "not resolved")
        assert s["score_low"] <= s["score"] <= s["score_high"]
        assert len(s["seeds"]) == len(s["variants"]) and all(
            len(x) == 3 for x in s["seeds"].values())
    agg = found["aggregate"]
    assert agg["suites"] == SUITES and agg["n"] == 3 * (4 + 2)
    assert agg["score"] == np.mean([s["score"] for s in found["suites"]])

    api = run(sys.executable, "-c", API.format(suites=SUITES))
    assert api.returncode == 0, api.stderr
    answer = json.loads(api.stdout.splitlines()[-1])
    assert "already stored" in api.stdout  # nothing trained again
    assert answer["payload"] == found
    assert answer["frame"] == [*SUITES, "aggregate"]
    assert answer["panels"] == ["xaxis", "xaxis2"]

    table = run(*CLI, "profile", "clipped.py", "--suites", *SUITES, "--epochs", "1",
                "--seeds", "3")
    assert table.returncode == 0, table.stderr
    assert "clipped across suites" in table.stdout
    assert f"Score {agg['score']:.3f} [{agg['score_low']:.3f}, {agg['score_high']:.3f}]" \
        in table.stdout

    wrong = run(*CLI, "profile", "clipped.py", "--suites", "tta")
    assert wrong.returncode == 2 and "does not fit tta" in wrong.stderr
