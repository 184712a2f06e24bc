"""The sandbox's isolation layers are one record each (harness/sandbox/layers.py): every
layer docs/sandbox.md numbers has one, the launcher, the process and the child iterate over
them, and a new record is picked up everywhere. Nothing here launches a sandbox."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.sandbox import launch, layers, process
from harness.sandbox.launch import SandboxUnavailable, isolation_support
from harness.sandbox.layers import LAYERS, Confinement, Layer, Setup

DOC = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"
# A cell's environment.sandbox of one process, as stored and shown (assert_layers in
# tests/sandbox/hostile_cases.py checks the whole record of real runs).
RECORD_KEYS = {"mode", "namespaces", "uid", "landlock", "seccomp", "python_guard",
               "pids_cgroup", "memory_cgroup", "tmpfs_workdir"}
# What the child reads of job.json (tests/sandbox/test_sandbox_kernel.py writes these too).
JOB_FLAGS = {"pid_namespace", "landlock", "seccomp", "python_guard"}
FULL = {"namespaces": True, "setpriv": True, "uid_drop": False, "landlock": 6}
LIMITS = process.Limits(wall_seconds=5, cpu_seconds=5, memory_bytes=1 << 30,
                        disk_bytes=1 << 20, output_bytes=1 << 10)


def documented_layers() -> list[str]:
    """The bold titles of the numbered list under "## Isolation layers"."""
    text = DOC.read_text()
    section = text.split("## Isolation layers", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. \*\*(.+?)\*\*", section, flags=re.M)


def extra_layer(calls: list[str] | None = None) -> Layer:
    """A hypothetical tenth layer that touches every place a layer can."""
    def apply(confinement: Confinement):
        calls.append("import extra")
        return lambda: calls.append("apply extra")

    return Layer("extra", "Extra", "nowhere", probe=lambda: {"extra": 1},
                 offered=lambda support: support.get("extra"), strict=True,
                 exec_lacks="extra walls", flag="extra", job=lambda setup: True,
                 apply=apply if calls is not None else None, launched=("extra_layer",),
                 record=lambda setup: {"extra": setup.got("extra_layer")})


def test_every_documented_layer_has_exactly_one_record():
    documented = documented_layers()
    assert len(documented) == 9, documented
    titles = [layer.title for layer in LAYERS]
    assert Counter(titles) == Counter(documented)
    assert titles == documented  # LAYERS is in the documented order
    assert len({layer.name for layer in LAYERS}) == len(LAYERS)


def test_each_layer_is_in_the_environment_record():
    launched = SimpleNamespace(**dict.fromkeys(layers.launched(), True))
    record = process.isolation_record(Setup(isolation_support(), uid=None, running=launched))
    assert set(record) == RECORD_KEYS, record
    for layer in LAYERS:
        if layer.record is None:
            assert layer.unrecorded, layer.name  # and says why it adds nothing
            continue
        keys = set(layer.record(Setup(isolation_support(), running=launched)))
        assert keys and keys <= set(record), (layer.name, keys)
    assert record["pids_cgroup"] and record["memory_cgroup"] and record["tmpfs_workdir"]
    nothing = process.isolation_record(Setup(FULL, uid=200_001, python_guard=False))
    assert {k: nothing[k] for k in RECORD_KEYS - {"mode", "seccomp"}} == {
        "namespaces": True, "uid": 200_001, "landlock": 6, "python_guard": False,
        "pids_cgroup": False, "memory_cgroup": False, "tmpfs_workdir": False}
    assert process.isolation_record(Setup({**FULL, "landlock": 0}))["landlock"] is None


def test_the_probe_and_the_job_flags_come_from_the_layers():
    support = isolation_support()
    assert set(support) == {"namespaces", "landlock", "setpriv", "uid_drop"}
    assert isolation_support() is support  # probed once per process
    flags = layers.job_flags(Setup(FULL, python_guard=False))
    assert set(flags) == JOB_FLAGS
    assert flags["pid_namespace"] is True and flags["landlock"] is True
    assert flags["python_guard"] is False
    assert layers.job_flags(Setup({**FULL, "landlock": 0}))["landlock"] is False
    assert set(layers.launched()) == {"pids_cgroup", "memory_cgroup", "tmpfs_workdir",
                                      "minimal_root"}


def test_strict_mode_errors(monkeypatch):
    bare = {"namespaces": False, "landlock": 0, "setpriv": False, "uid_drop": False}
    assert layers.strict_problem(bare, None) == (
        f"HARNESS_SANDBOX_STRICT=1 but this machine offers {bare}")
    assert layers.strict_problem(FULL, "fork") == ""
    assert layers.strict_problem(FULL, None) == ""
    assert layers.strict_problem(FULL, "exec") == (
        "HARNESS_SANDBOX_STRICT=1 needs the fork server: exec mode has no cgroups and no "
        "private work directory")
    # through a Process: refused before anything is prepared or launched
    monkeypatch.setenv("HARNESS_SANDBOX_STRICT", "1")
    monkeypatch.setattr(process, "isolation_support", lambda: bare)
    with pytest.raises(SandboxUnavailable, match="this machine offers"):
        process.Process({"task": "validate"}, "", "x.py", LIMITS)


def test_the_child_applies_landlock_then_seccomp_then_the_guard(monkeypatch):
    assert [layer.name for layer in LAYERS if layer.apply] == [
        "landlock", "seccomp", "python_guard"]
    calls: list[str] = []

    def fake(name: str, flag: str) -> Layer:
        def apply(confinement: Confinement):
            calls.append(f"import {name}")
            return lambda: calls.append(f"apply {name}")

        return Layer(name, name, "here", flag=flag, job=lambda setup: True, apply=apply,
                     unrecorded="a test's")

    monkeypatch.setattr(layers, "LAYERS", (fake("a", "a"), fake("b", "b"), fake("c", "c")))
    layers.lock_down({"b": False}, Confinement([], []))
    assert calls == ["import a", "import c", "apply a", "apply c"]  # imports come first


def test_an_extra_layer_is_picked_up_everywhere(monkeypatch):
    calls: list[str] = []
    support = dict(isolation_support())
    monkeypatch.setattr(layers, "LAYERS", (*LAYERS, extra_layer(calls)))
    assert launch.isolation_support.__wrapped__()["extra"] == 1  # the probe, uncached
    assert layers.strict_problem(support, None).startswith(
        "HARNESS_SANDBOX_STRICT=1 but this machine offers")
    assert layers.strict_problem({**FULL, "extra": 1}, "fork") == ""
    assert layers.strict_problem({**FULL, "extra": 1}, "exec").endswith(
        "no cgroups and no private work directory and no extra walls")
    assert layers.job_flags(Setup(FULL))["extra"] is True
    assert "extra_layer" in layers.launched()
    assert launch._Forked(None, 0, None).extra_layer is False  # a launch says it got it
    running = SimpleNamespace(extra_layer=True)
    assert process.isolation_record(Setup(FULL, running=running))["extra"] is True
    assert process.isolation_record(Setup(FULL))["extra"] is False
    monkeypatch.setattr(layers, "LAYERS", (extra_layer(calls),))  # no kernel layer here
    layers.lock_down({"extra": True}, Confinement([], []))
    assert calls == ["import extra", "apply extra"]
    monkeypatch.setenv("HARNESS_SANDBOX_STRICT", "1")
    monkeypatch.setattr(process, "isolation_support", lambda: support)
    with pytest.raises(SandboxUnavailable, match="offers"):
        process.Process({"task": "validate"}, "", "x.py", LIMITS)


def test_a_layer_says_how_it_is_recorded():
    with pytest.raises(ValueError, match="a record, or why"):
        Layer("bare", "Bare", "nowhere")
    with pytest.raises(ValueError, match="strict mode"):
        Layer("bare", "Bare", "nowhere", strict=True, unrecorded="no")


def test_the_layers_module_imports_nothing_heavy():
    """The child imports it before its lock-down (``python -I``): no torch, numpy or
    registry at module level."""
    code = ("import sys, harness.sandbox.layers\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'numpy', 'harness')))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "['harness', 'harness.sandbox', 'harness.sandbox.layers']"
