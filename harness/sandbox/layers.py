"""The sandbox's isolation layers, one record each (docs/sandbox.md, "Isolation layers").

A :class:`Layer` says everything the harness does with one layer by name: how the machine
is probed for it (``launch.isolation_support``, cached once per process), what
``HARNESS_SANDBOX_STRICT=1`` requires of it, the flag that tells the child to apply it
(``job.json``), how the child applies it, which attributes of a launch say it got it (the
fork server's reply) and what it adds to a cell's ``environment.sandbox``. The launcher
(:mod:`harness.sandbox.launch`), the trusted side of a process
(:mod:`harness.sandbox.process`) and the child (:mod:`harness.sandbox.child`) iterate over
:data:`LAYERS` with the functions at the end of this module; a new layer is one record
here and its test (tests/sandbox/test_sandbox_layers.py), plus its mechanism where the fork server
or the exec command line applies it.

The child applies its layers in the order of :data:`LAYERS`, and the order is part of the
security: Landlock, then seccomp, then the audit-hook guard (the guard's own imports and
setup run before the kernel refuses anything, and the guard is installed last, once
nothing trusted is left to start).

The child (``python -I -m harness.sandbox.child``) imports this module before its
lock-down: nothing heavy at module level (no torch, numpy or registry); each probe and
each application imports what it needs when it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Support = Mapping[str, Any]  # launch.isolation_support(): what the machine grants


@dataclass(frozen=True)
class Setup:
    """What the trusted side set up for one sandboxed process: the machine's probe, what
    the caller switched off (the guard, for tests of the kernel layers alone) and, once
    launched, the launch (:class:`harness.sandbox.launch.Running`)."""

    support: Support
    uid: int | None = None
    python_guard: bool = True
    running: Any = None

    def got(self, attribute: str) -> bool:
        """Whether the launch got a layer it reports (see :attr:`Layer.launched`)."""
        return bool(getattr(self.running, attribute, False))


@dataclass(frozen=True)
class Confinement:
    """In the child: the paths it may read and the ones it may write."""

    read: list[str]
    write: list[str]


@dataclass(frozen=True)
class Layer:
    """One isolation layer, as docs/sandbox.md numbers it (``title``)."""

    name: str
    title: str  # its bold heading under "Isolation layers" in docs/sandbox.md
    where: str  # where it is applied (the mechanism)
    # Keys it adds to ``launch.isolation_support()`` (probed once per process).
    probe: Callable[[], dict[str, Any]] | None = None
    # Whether the machine offers it, from that probe (truthy / falsy).
    offered: Callable[[Support], Any] | None = None
    # HARNESS_SANDBOX_STRICT=1 refuses a machine that does not offer it ...
    strict: bool = False
    # ... and exec mode, which lacks it: what exec mode has not (its error says so).
    exec_lacks: str = ""
    # The child applies it when ``job.json`` holds ``flag`` true (or not at all); the
    # parent writes the flag's value.
    flag: str = ""
    job: Callable[[Setup], Any] | None = None
    # In the child: imports what applying it needs and returns the step that applies it;
    # every import comes before the first step, the steps run in LAYERS order.
    apply: Callable[[Confinement], Callable[[], Any]] | None = None
    # Attributes of a launch saying whether it got the layer (False in exec mode).
    launched: tuple[str, ...] = ()
    # What it adds to a cell's ``environment.sandbox``; a layer without a record says why.
    record: Callable[[Setup], dict[str, Any]] | None = None
    unrecorded: str = ""

    def __post_init__(self) -> None:
        if (self.record is None) == (not self.unrecorded):
            raise ValueError(f"layer {self.name}: a record, or why it has none")
        if self.strict and self.offered is None:
            raise ValueError(f"layer {self.name}: strict mode needs what the machine offers")
        if (self.flag == "") != (self.job is None):
            raise ValueError(f"layer {self.name}: a job flag is a name and its value")


# --- probes and applications (imports only when they run) --------------------------------


def _probe_namespaces() -> dict[str, Any]:
    import shutil
    import subprocess

    namespaces = False
    if shutil.which("unshare"):
        try:
            probe = subprocess.run(["unshare", "--net", "--pid", "--ipc", "--fork",
                                    "--kill-child", "--mount-proc", "true"],
                                   capture_output=True, timeout=20)
            namespaces = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            namespaces = False
    return {"namespaces": namespaces}


def _probe_privileges() -> dict[str, Any]:
    import shutil

    return {"setpriv": shutil.which("setpriv") is not None,
            "uid_drop": os.geteuid() == 0 and _readable_by_others()}


def _readable_by_others() -> bool:
    """Whether an unprivileged uid can run this interpreter and import the harness."""
    import sys
    from pathlib import Path

    import numpy as np

    import harness

    paths = [Path(sys.executable).resolve(), Path(os.__file__).resolve(),
             Path(harness.__file__).resolve(), Path(np.__file__).resolve()]
    for path in paths:
        for part in [*reversed(path.parents), path]:
            mode = part.stat().st_mode
            if part.is_dir() and not mode & 0o001 or not part.is_dir() and not mode & 0o004:
                return False
    return True


def _probe_landlock() -> dict[str, Any]:
    from harness.sandbox import landlock

    return {"landlock": landlock.abi_version()}


def _landlock_abi(support: Support) -> int | None:
    return support["landlock"] if support["landlock"] > 0 else None


def _restrict(confinement: Confinement) -> Callable[[], Any]:
    from harness.sandbox import landlock

    return lambda: landlock.restrict(confinement.read, confinement.write)


def _seccomp_supported(_: object = None) -> bool:
    from harness.sandbox import seccomp

    return seccomp.supported()


def _install_seccomp(confinement: Confinement) -> Callable[[], Any]:
    from harness.sandbox import seccomp

    return seccomp.install


def _install_guard(confinement: Confinement) -> Callable[[], Any]:
    from harness.sandbox.guard import Guard

    return lambda: Guard(confinement.read, confinement.write).install()


def _got(*attributes: str) -> Callable[[Setup], dict[str, Any]]:
    return lambda setup: {name: setup.got(name) for name in attributes}


# --- the layers, in the order of docs/sandbox.md -----------------------------------------

NAMESPACES = Layer(
    "namespaces", "Namespaces",
    "unshare(2) of net, PID, IPC and mount namespaces: the fork server's middle process "
    "(zygote._middle), or unshare(1) in exec mode (launch._Exec)",
    probe=_probe_namespaces, offered=lambda support: support["namespaces"], strict=True,
    # the child's read roots hold /proc only in a PID namespace of its own
    flag="pid_namespace", job=lambda setup: setup.support["namespaces"],
    record=lambda setup: {"namespaces": setup.support["namespaces"]})

PRIVILEGES = Layer(
    "privileges", "Privileges",
    "every capability dropped, a uid of its own where one can run the interpreter: "
    "zygote._drop_privileges, or setpriv(1) in exec mode; no_new_privs with Landlock and "
    "seccomp",
    probe=_probe_privileges, record=lambda setup: {"uid": setup.uid or 0})

LIMITS = Layer(
    "limits", "Limits",
    "rlimits (process._rlimits) set before the child starts (zygote._job, or launch._Exec's "
    "preexec_fn); the pids and memory cgroups by the fork server (cgroups.py)",
    exec_lacks="cgroups", launched=("pids_cgroup", "memory_cgroup"),
    record=_got("pids_cgroup", "memory_cgroup"))

WORKDIR = Layer(
    "workdir", "Work directory",
    "a tmpfs of the disk quota mounted by the namespace's init (minimal_root.py); without "
    "one the worker measures the directory (process.Process.watch)",
    exec_lacks="private work directory", launched=("tmpfs_workdir",),
    record=_got("tmpfs_workdir"))

MINIMAL_ROOT = Layer(
    "minimal_root", "Minimal root",
    "pivot_root into a read-only tmpfs of bind mounts, by the namespace's init "
    "(minimal_root.py)",
    launched=("minimal_root",),
    # strict mode refuses exec mode for the work directory already
    unrecorded="built exactly where tmpfs_workdir is: init builds both or the job never "
               "starts")

LANDLOCK = Layer(
    "landlock", "Landlock",
    "the child, first of its lock-down (landlock.restrict)",
    probe=_probe_landlock, offered=lambda support: support["landlock"], strict=True,
    flag="landlock", job=lambda setup: setup.support["landlock"] > 0, apply=_restrict,
    record=lambda setup: {"landlock": _landlock_abi(setup.support)})

SECCOMP = Layer(
    "seccomp", "seccomp-bpf",
    "the child, after Landlock (seccomp.install)",
    offered=_seccomp_supported, strict=True,
    flag="seccomp", job=_seccomp_supported, apply=_install_seccomp,
    record=lambda setup: {"seccomp": _seccomp_supported()})

PYTHON_GUARD = Layer(
    "python_guard", "Python audit hook",
    "the child, last of its lock-down (guard.Guard.install)",
    flag="python_guard", job=lambda setup: setup.python_guard, apply=_install_guard,
    record=lambda setup: {"python_guard": setup.python_guard})

SUPERVISION = Layer(
    "supervision", "Supervision by the worker",
    "the worker: process.Process.watch (wall clock, output cap, disk) and "
    "remote.LossServers (heartbeats)",
    unrecorded="always on: the worker watches every process it starts")

LAYERS: tuple[Layer, ...] = (NAMESPACES, PRIVILEGES, LIMITS, WORKDIR, MINIMAL_ROOT, LANDLOCK,
                             SECCOMP, PYTHON_GUARD, SUPERVISION)


# --- what the launcher, the process and the child do with them -----------------------------


def probe() -> dict[str, Any]:
    """What this machine grants, every layer's probe together (uncached: the launcher's
    ``isolation_support`` caches it)."""
    support: dict[str, Any] = {}
    for layer in LAYERS:
        if layer.probe is not None:
            support.update(layer.probe())
    return support


def strict_problem(support: Support, mode: str | None) -> str:
    """Why ``HARNESS_SANDBOX_STRICT=1`` refuses to start a sandboxed process on this
    machine in this launch mode ("" when it does not)."""
    if not all(layer.offered(support) for layer in LAYERS if layer.strict):
        return f"HARNESS_SANDBOX_STRICT=1 but this machine offers {support}"
    lacking = [layer.exec_lacks for layer in LAYERS if layer.exec_lacks]
    if mode == "exec" and lacking:
        return ("HARNESS_SANDBOX_STRICT=1 needs the fork server: exec mode has "
                + " and ".join(f"no {what}" for what in lacking))
    return ""


def job_flags(setup: Setup) -> dict[str, Any]:
    """The child's instructions (``job.json``): which layers it applies."""
    return {layer.flag: layer.job(setup) for layer in LAYERS if layer.job is not None}


def launched() -> tuple[str, ...]:
    """The attributes a launch sets to say which layers it got."""
    return tuple(name for layer in LAYERS for name in layer.launched)


def recorded(setup: Setup) -> dict[str, Any]:
    """The layers' part of a cell's ``environment.sandbox``: what the trusted side asked
    for and the launch reported, never what the child says of itself."""
    record: dict[str, Any] = {}
    for layer in LAYERS:
        if layer.record is not None:
            record.update(layer.record(setup))
    return record


def lock_down(job: Mapping[str, Any], confinement: Confinement) -> None:
    """In the child: apply every layer it applies itself that ``job`` asks for, in order,
    once all of them imported what they need. An OSError means a requested layer could not
    be applied (the child fails closed)."""
    steps = [layer.apply(confinement) for layer in LAYERS
             if layer.apply is not None and job.get(layer.flag, True)]
    for step in steps:
        step()
