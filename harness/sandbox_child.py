"""The sandboxed child: ``python -I -m harness.sandbox_child WORKDIR``.

Runs as the last stage of :mod:`harness.sandbox`'s launch (inside fresh network, PID
and mount namespaces, under rlimits, with a scrubbed environment). It imports the
trusted trainer first (the suite's pipeline, found through :mod:`harness.registry`),
then locks itself down (Landlock, then the audit-hook guard), then loads the untrusted
objective from the work directory, trains, and writes plain numpy arrays
(``outputs.npz``) and ``result.json`` (the trainer's info, or the objective's error). It
never sees labels it may not train on: the parent wrote only the trainer's inputs into
the work directory.
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
READY = "[sandbox ready]"  # stderr line once locked down, before the objective loads
DENIED_PACKAGES = ("sklearn", "scikit_learn", "webapp", "tasks", "django", "celery", "kombu",
                   "redis", "psycopg", "sqlalchemy", "django_celery_results")


def read_roots(workdir: Path, pid_namespace: bool, device: str) -> list[str]:
    """What the trainer may read: the interpreter's library, the packages it imports."""
    import harness
    from harness import registry

    stdlib = Path(os.__file__).parent
    roots = _entries(stdlib, lambda name: name != "site-packages")
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        if Path(site).is_dir():
            roots += _entries(Path(site), lambda n: not n.lower().startswith(DENIED_PACKAGES))
    roots += [str(Path(harness.__file__).parent), *registry.readable_paths()]
    roots += ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/etc/ld.so.cache", "/dev/urandom",
              "/dev/zero", "/sys/devices/system/cpu", "/sys/fs/cgroup/cpu"]
    if pid_namespace:  # a /proc of the sandbox's own processes only
        roots.append("/proc")
    if device.startswith("cuda"):
        roots += ["/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices"]
    return roots


def _entries(directory: Path, keep) -> list[str]:
    """The directory's entries to allow; a directory this uid cannot even list gives
    nothing (it cannot read under it either)."""
    try:
        return [str(p) for p in directory.iterdir() if keep(p.name)]
    except PermissionError:
        return []


def write_roots(workdir: Path, device: str) -> list[str]:
    roots = [str(workdir), "/dev/null"]
    if device.startswith("cuda"):
        roots += [str(p) for p in Path("/dev").glob("nvidia*")]
    return roots


def main(workdir: Path) -> None:
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE; nothing outside is ours
    job = json.loads((workdir / "job.json").read_text())
    import numpy as np
    import torch

    torch.set_num_threads(int(job["threads"]))
    from harness import registry

    registry.adopt(job["suite_packages"])
    if job.get("task") == "validate":
        from harness.objectives.validate import smoke_test

        for hook in registry.hooks():  # every smoke test imported before the lock-down
            smoke_test(hook)
        _lock_down(workdir, job)
        _finish(workdir, _validate(workdir, job), {})
    suite = registry.suite_at(job["suite"], job["suite_version"])
    steps = registry.pipeline(suite)
    with np.load(workdir / "inputs.npz", allow_pickle=False) as npz:
        inputs = {k: npz[k] for k in npz.files}
    os.unlink(workdir / "inputs.npz")  # read once; the objective gets them through the trainer
    violations = _lock_down(workdir, job)
    result, arrays = _train(workdir, job, suite, steps, inputs)
    result["violations"] = list(violations)
    _finish(workdir, result, arrays)


def _lock_down(workdir: Path, job: dict) -> list[str]:
    """Landlock and seccomp (or exit: no objective runs without a requested layer), then
    the audit-hook guard; returns the guard's record of refusals."""
    from harness import landlock, seccomp
    from harness.sandbox_guard import Guard

    device = job.get("device", "cpu")
    read = read_roots(workdir, job.get("pid_namespace", False), device)
    write = write_roots(workdir, device)
    try:
        if job.get("landlock", True):
            landlock.restrict(read, write)
        if job.get("seccomp", True):
            seccomp.install()
    except OSError as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    guard = Guard(read, write)
    if job.get("python_guard", True):
        guard.install()
    sys.stdout.reconfigure(line_buffering=True)  # what it printed survives a fatal refusal
    print(READY, file=sys.stderr, flush=True)  # from here on, an exit is the objective's
    return guard.violations


def _train(workdir: Path, job: dict, suite, steps, inputs: dict) -> tuple[dict, dict]:
    """(result, arrays): the trainer's info and arrays, or the objective's error."""
    from harness.objectives.loading import ObjectiveError, load_objective
    from harness.pipeline import failure_reason, train_safely

    try:
        objective = load_objective(str(workdir / job["objective_file"]), job["hyperparameters"])
        out = train_safely(steps, suite, objective, inputs, job["plan"],
                           device=job.get("device", "cpu"), mode=job.get("mode", "auto"))
        if out.error:
            return {"error": out.error, "reason": out.reason}, {}
        return {"info": out.info}, out.arrays
    except ObjectiveError as exc:  # e.g. a MemoryError while the module loads: "memory"
        return {"error": exc.message, "reason": failure_reason(exc.__cause__ or exc)}, {}
    except BaseException as exc:  # noqa: BLE001 - anything the objective raises is its result
        lines = traceback.format_exception_only(type(exc), exc)
        return {"error": "".join(lines).strip(), "reason": failure_reason(exc)}, {}


def _validate(workdir: Path, job: dict) -> dict:
    """The engine's validator; what the form needs of the objective, as JSON."""
    from harness.objectives.validate import validate

    try:
        validation = validate(str(workdir / job["objective_file"]), job.get("overrides"))
    except BaseException as exc:  # noqa: BLE001 - the validator never raises; if it does
        return {"problems": [{"code": "exception", "severity": "error",
                              "message": f"{type(exc).__name__}: {exc}"}]}
    out: dict = {"problems": [{"code": p.code, "severity": p.severity, "message": p.message}
                              for p in validation.problems]}
    o = validation.objective
    if o is not None:
        out["objective"] = {"name": o.name, "description": o.description,
                            "hooks": list(o.hooks), "defaults": dict(o.defaults),
                            "hyperparameters": dict(o.hyperparameters),
                            "context": {k: list(v) for k, v in o.context.items()}}
    return out


def _finish(workdir: Path, result: dict, arrays: dict) -> None:
    import numpy as np

    sys.stdout.flush()
    sys.stderr.flush()
    if arrays:
        np.savez(workdir / "outputs.npz", **arrays)
    (workdir / "result.json").write_text(json.dumps(result, default=repr))
    os._exit(0)  # no atexit handlers or finalizers the objective may have registered


if __name__ == "__main__":
    main(Path(sys.argv[1]))
