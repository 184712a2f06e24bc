"""docs/example.ipynb runs top to bottom in a real Jupyter kernel (nbclient), with 2-epoch
smoke runs on an embedded database of its own, and what it shows equals what the CLI
computes for the same cells trained afresh in another database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import cli_environment

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "example.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


def _text(cell) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                   for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    [parameters] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert "EPOCHS = None" in parameters.source  # the full protocol for readers
    parameters.source = parameters.source.replace("EPOCHS = None", "EPOCHS = 2")
    env = cli_environment(root / "home")
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(root)}})
    client.execute(env=env, cwd=str(root))
    return nb, env, root


@pytest.mark.slow
def test_the_example_notebook_runs_and_draws_every_figure(executed):
    nb, _, _ = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    figures = [c for c in code if any(PLOTLY in o.get("data", {}) for o in c.outputs)]
    sources = [c.source for c in figures]
    assert len(figures) == 5, sources  # strip, family, curves, reliability, forest
    for cell in figures:
        [fig] = [o.data[PLOTLY] for o in cell.outputs if PLOTLY in o.get("data", {})]
        assert fig["data"], cell.source
    strip = next(c for c in figures if '"strip"' in c.source)
    [fig] = [o.data[PLOTLY] for o in strip.outputs if PLOTLY in o.get("data", {})]
    assert sorted(t["name"].rstrip(" ★") for t in fig["data"]) == ["ce", "gce", "truncated_ce"]
    assert "OK: truncated_ce" in _text(code[2])


@pytest.mark.slow
def test_its_tables_are_the_clis_numbers(executed):
    nb, env, root = executed
    [captured] = list((Path(env["HARNESS_HOME"]) / "captured").glob("*/truncated_ce.py"))
    fresh = cli_environment(root / "fresh")  # trained again, not read back
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "suite", "noisy-labels", "-o",
         str(captured), "-o", "gce", "--variants", "clean", "sym-0.4", "--seeds", "3",
         "--epochs", "2", "--json"], env=fresh, cwd=root, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    summary = next(c for c in nb.cells if c.cell_type == "code"
                   and c.source.startswith('noisy = api.run("noisy-labels"'))
    shown = _text(summary)
    rows = [r for rows in report["variants"].values() for r in rows]
    assert {r["objective"] for r in rows} == {"ce", "gce", "truncated_ce"}
    for r in rows:  # pandas prints 6 decimals
        assert f"{r['mean']:.6f}" in shown, (r, shown)
    versus = next(c for c in nb.cells if c.cell_type == "code"
                  and c.source.startswith("versus = api.compare"))
    assert "truncated_ce" in _text(versus) and "gce" in _text(versus)
