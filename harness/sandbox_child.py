"""The sandboxed child: ``python -I -m harness.sandbox_child WORKDIR``.

Runs as the last stage of :mod:`harness.sandbox`'s launch (inside fresh network, PID
and mount namespaces, under rlimits, with a scrubbed environment). It imports the
trusted trainer first, then locks itself down (Landlock, then the audit-hook guard),
then loads the untrusted objective from the work directory, trains, and writes plain
numpy arrays (``outputs.npz``) and a JSON report. It never sees labels it may not
train on: the parent wrote only the trainer's inputs into the work directory.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import traceback
from pathlib import Path

# Reading these could leak labels or secrets; the child never needs them.
SETUP_FAILED = 71  # exit status: a requested isolation layer could not be applied
DENIED_PACKAGES = ("sklearn", "scikit_learn", "webapp", "tasks", "django", "celery", "kombu",
                   "redis", "psycopg", "sqlalchemy", "django_celery_results")


def read_roots(workdir: Path, pid_namespace: bool, device: str) -> list[str]:
    """What the trainer may read: the interpreter's library, the packages it imports."""
    import harness
    import suites

    stdlib = Path(os.__file__).parent
    roots = [str(p) for p in stdlib.iterdir() if p.name != "site-packages"]
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        if Path(site).is_dir():
            roots += [str(p) for p in Path(site).iterdir()
                      if not p.name.lower().startswith(DENIED_PACKAGES)]
    roots += [str(Path(harness.__file__).parent), str(Path(suites.__file__).parent)]
    roots += ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/etc/ld.so.cache", "/dev/urandom",
              "/dev/zero", "/sys/devices/system/cpu", "/sys/fs/cgroup/cpu"]
    if pid_namespace:  # a /proc of the sandbox's own processes only
        roots.append("/proc")
    if device.startswith("cuda"):
        roots += ["/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices"]
    return roots


def write_roots(workdir: Path, device: str) -> list[str]:
    roots = [str(workdir), "/dev/null"]
    if device.startswith("cuda"):
        roots += [str(p) for p in Path("/dev").glob("nvidia*")]
    return roots


def main(workdir: Path) -> None:
    job = json.loads((workdir / "job.json").read_text())
    import numpy as np
    import torch

    torch.set_num_threads(int(job["threads"]))
    from harness import landlock, seccomp
    from harness.objectives.loading import ObjectiveError, load_objective
    from harness.sandbox_guard import Guard
    from suites import suite_at
    from suites.jobs import failure_reason, protocol_module, train_safely

    suite = suite_at(job["suite"], job["suite_version"])
    module = protocol_module(suite)
    with np.load(workdir / "inputs.npz", allow_pickle=False) as npz:
        inputs = {k: npz[k] for k in npz.files}
    os.unlink(workdir / "inputs.npz")  # read once; the objective gets them through the trainer
    device = job.get("device", "cpu")
    read = read_roots(workdir, job.get("pid_namespace", False), device)
    write = write_roots(workdir, device)
    isolation: dict[str, object] = {}
    try:  # every layer the parent asked for, or no objective runs at all
        if job.get("landlock", True):
            isolation["landlock"] = landlock.restrict(read, write)
        if job.get("seccomp", True):
            isolation["seccomp"] = seccomp.install()
    except OSError as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    guard = Guard(read, write)
    if job.get("python_guard", True):
        guard.install()
        isolation["python_guard"] = True

    outputs: dict = {}
    try:
        objective = load_objective(str(workdir / job["objective_file"]), job["hyperparameters"])
        outputs, report = train_safely(module, suite, objective, inputs, job["plan"],
                                       device=device, mode=job.get("mode", "auto"))
    except ObjectiveError as exc:  # e.g. a MemoryError while the module loads: "memory"
        report = {"error": exc.message, "reason": failure_reason(exc.__cause__ or exc)}
    except BaseException as exc:  # noqa: BLE001 - anything the objective raises is its result
        lines = traceback.format_exception_only(type(exc), exc)
        report = {"error": "".join(lines).strip(), "reason": failure_reason(exc)}
    report["violations"] = list(guard.violations)
    report["isolation"] = isolation
    sys.stdout.flush()
    sys.stderr.flush()
    if outputs:
        np.savez(workdir / "outputs.npz", **outputs)
    (workdir / "report.json").write_text(json.dumps(report, default=str))
    os._exit(0)  # no atexit handlers or finalizers the objective may have registered


if __name__ == "__main__":
    main(Path(sys.argv[1]))
