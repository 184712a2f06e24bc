"""The sandboxed child: ``python -I -m harness.sandbox.child WORKDIR``.

Runs as the last stage of :mod:`harness.sandbox`'s launch (inside fresh network, PID,
IPC and mount namespaces, under rlimits, with a scrubbed environment). It imports what it
needs first, then locks itself down (Landlock, seccomp, then the audit-hook guard), then
loads the untrusted objective from the work directory and does one of two tasks:

- ``serve``: the objective's loss for ONE member of a training run. The trusted trainer
  (in the worker) sends, per hook call, exactly the tensors the hook asks for on
  descriptor 0 and reads the loss and its gradients back on descriptor 3
  (:mod:`harness.sandbox.lossproto`). The child holds no model, no data set, no other member's
  labels and no weights: nothing it could return changes more than its own loss.
- ``validate``: the engine's validator, its report written as ``result.json``.

The guard reports a refusal on descriptor 4 when the parent gave one (never on stdout or
stderr, which the objective controls and the parent only captures).
"""

from __future__ import annotations

import json
import os
import platform
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
    from harness.contract import registry
    stdlib = Path(os.__file__).parent
    roots = _entries(stdlib, lambda name: name != "site-packages")
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        if Path(site).is_dir():
            roots += _entries(Path(site), lambda n: not n.lower().startswith(DENIED_PACKAGES))
    roots += [str(Path(harness.__file__).parent), *registry.readable_paths()]
    # Of /usr/lib only the shared libraries: not /usr/lib/python3 (Debian's packages, among
    # them _cffi_backend, which calls libc where no audit event sees it), nor the rest.
    arch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    roots += [f"/usr/lib/{arch}", f"/lib/{arch}", "/lib64", "/usr/lib64", "/etc/ld.so.cache",
              "/dev/urandom", "/dev/zero", "/sys/devices/system/cpu", "/sys/fs/cgroup/cpu"]
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
    import numpy  # noqa: F401 - imported before the lock-down
    import torch

    torch.set_num_threads(int(job["threads"]))
    from harness.contract import registry
    registry.adopt(job["suite_packages"])
    if job.get("task") == "validate":
        from harness.objectives.validate import smoke_test

        for hook in registry.hooks():  # every smoke test imported before the lock-down
            smoke_test(hook)
        _lock_down(workdir, job)
        _finish(workdir, _validate(workdir, job))
    from harness.objectives import loading  # noqa: F401
    from harness.sandbox import traced
    from harness.train import loop  # noqa: F401

    traced.warm()  # torch.export's lazy imports (done once in the fork server)

    _lock_down(workdir, job)
    _serve(workdir, job)


def _lock_down(workdir: Path, job: dict) -> None:
    """Every layer the child applies itself, in the order of
    :data:`harness.sandbox.layers.LAYERS` (Landlock, seccomp, then the audit-hook guard),
    as ``job`` asks; or exit: no objective runs without a requested layer."""
    from harness.sandbox import layers, shared_pages

    shared = shared_pages.writable_shared()
    if shared:  # memory another job could read or lock: serve nothing
        print(f"sandbox setup failed: writable shared memory inherited: {'; '.join(shared)}",
              file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    device = job.get("device", "cpu")
    confinement = layers.Confinement(
        read_roots(workdir, job.get(layers.NAMESPACES.flag, False), device),
        write_roots(workdir, device))
    try:
        layers.lock_down(job, confinement)
    except OSError as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    sys.stdout.reconfigure(line_buffering=True)  # what it printed survives a fatal refusal
    print(READY, file=sys.stderr, flush=True)  # from here on, an exit is the objective's


def _serve(workdir: Path, job: dict) -> None:
    """Load the objective, say hello, then answer hook calls until the trainer hangs up."""
    import numpy as np
    import torch

    from harness.objectives.loading import ObjectiveError, load_objective
    from harness.sandbox.lossproto import frame, nbytes, read_exact, rebuild, split, write_all
    from harness.train.loop import NO_GRADIENT

    def reply(header: dict, payload: list[bytes | memoryview] = ()) -> None:
        # The header goes first and each part unjoined: an output too large to copy is
        # still declared, and the trainer refuses it before reading a byte of it.
        write_all(3, frame(header))
        for part in payload:
            write_all(3, part)

    try:
        objective = load_objective(str(workdir / job["objective_file"]), job["hyperparameters"])
    except BaseException as exc:  # noqa: BLE001 - anything at import is the objective's
        cause = exc.__cause__ or exc if isinstance(exc, ObjectiveError) else exc
        reply(_error(exc.message if isinstance(exc, ObjectiveError) else _text(exc), cause))
        os._exit(0)
    reply({"hello": _declared(objective)})
    bound: dict = {}
    while True:
        prefix = read_exact(0, 4)
        if not prefix:
            os._exit(0)  # the trainer is done with us
        header = json.loads(read_exact(0, int.from_bytes(prefix, "little")))
        if "trace" in header:
            _trace(objective, bound, header, reply)
            continue
        leaves = header["leaves"]
        arrays = split(read_exact(0, nbytes(leaves, list(range(len(leaves))))), leaves,
                       list(range(len(leaves))))
        tensors = [torch.from_numpy(a) for a in arrays]
        if header.get("apply"):
            _apply(objective, bound, header, tensors, reply)
            continue
        try:
            with torch.enable_grad():
                for i in header["grad"]:
                    tensors[i].requires_grad_()
                args = [rebuild(v, tensors) for v in header["args"]]
                kwargs = {k: rebuild(v, tensors) for k, v in header["kwargs"].items()}
                name = header["hook"]
                hook = bound[name] if name in bound else bound.setdefault(
                    name, objective.bind(name))
                loss = _reduced(hook(*args, **kwargs))
                wanted = [tensors[i] for i in header["grad"]]
                if wanted and not loss.requires_grad:
                    raise ValueError(NO_GRADIENT)
                grads = (torch.autograd.grad(loss, wanted, allow_unused=True)
                         if wanted else [])
            out = [np.float64(loss.detach().double().item()).tobytes()]
            for i, g in zip(header["grad"], grads, strict=True):
                g = torch.zeros_like(tensors[i]) if g is None else g.detach()
                out.append(g.to(tensors[i].dtype).contiguous().numpy().tobytes())
            for i in header["mutable"]:
                t = tensors[i].detach()
                if tuple(t.shape) != tuple(leaves[i][1]) or t.numpy().dtype.str != leaves[i][0]:
                    raise ValueError("the hook changed the shape or dtype of its state")
                out.append(t.contiguous().numpy().tobytes())
        except BaseException as exc:  # noqa: BLE001 - the hook's failure is its result
            reply(_error(f"{_text(exc)}\n{_traceback(exc, objective.path)}".rstrip(), exc))
            continue
        reply({"ok": True}, out)


def _apply(objective, bound: dict, header: dict, tensors: list, reply) -> None:
    """A post-hoc hook's output for this member, as it returned it (no loss, no gradient)."""
    import torch

    from harness.sandbox.lossproto import DTYPES, rebuild

    try:
        args = [rebuild(v, tensors) for v in header["args"]]
        kwargs = {k: rebuild(v, tensors) for k, v in header["kwargs"].items()}
        name = header["hook"]
        hook = bound[name] if name in bound else bound.setdefault(name, objective.bind(name))
        out = hook(*args, **kwargs)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"{name} must return a tensor, got {type(out).__name__}")
        array = out.detach().cpu().contiguous().numpy()
        if array.dtype.str not in DTYPES:
            raise TypeError(f"{name} returned a tensor of dtype {out.dtype}")
    except BaseException as exc:  # noqa: BLE001 - the hook's failure is its result
        reply(_error(f"{_text(exc)}\n{_traceback(exc, objective.path)}".rstrip(), exc))
        return
    reply({"ok": True, "out": [array.dtype.str, list(array.shape)]},
          [memoryview(array.reshape(-1)).cast("B")])


def _trace(objective, bound: dict, header: dict, reply) -> None:
    """The hook as a graph of ATen ops (:mod:`harness.sandbox.traced`), or why it cannot be one."""
    from harness.sandbox.lossproto import rebuild
    from harness.sandbox.traced import Untraceable, export

    name = header["trace"]
    try:
        hook = bound[name] if name in bound else bound.setdefault(name, objective.bind(name))

        def loss(*inputs):
            args = [rebuild(v, list(inputs)) for v in header["args"]]
            kwargs = {k: rebuild(v, list(inputs)) for k, v in header["kwargs"].items()}
            return _reduced(hook(*args, **kwargs))

        graph, blobs = export(loss, header["leaves"])
    except Untraceable as exc:
        reply({"untraceable": str(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - served per call instead, where it shows
        reply({"untraceable": _text(exc)[:300]})
        return
    reply({"graph": graph}, blobs)


def _reduced(out):
    from harness.train.loop import reduce_loss

    loss = reduce_loss(out)
    if not loss.is_floating_point():
        raise TypeError(f"the loss must be a floating-point tensor, got {loss.dtype}")
    return loss


def _declared(objective) -> dict:
    """What the trainer needs to know of the objective (JSON: it checks every field)."""
    declared = {} if objective.model is None else objective.model
    model = declared if isinstance(declared, dict) else {"invalid": repr(declared)[:200]}
    return {"name": objective.name, "hooks": list(objective.hooks),
            "context": {k: list(v) for k, v in objective.context.items()},
            "hyperparameters": dict(objective.hyperparameters),
            "defaults": dict(objective.defaults), "model": model}


def _error(text: str, cause: BaseException) -> dict:
    from harness.contract.pipeline import failure_reason

    return {"error": text[:20_000], "reason": failure_reason(cause)}


def _text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _traceback(exc: BaseException, path: str) -> str:
    from harness.objectives.loading import user_traceback

    try:
        return user_traceback(exc, path)
    except Exception:  # noqa: BLE001 - a hostile traceback is no reason to stop answering
        return ""


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
                            "context": {k: list(v) for k, v in o.context.items()},
                            "search_space": dict(o.search_space)}
    return out


def _finish(workdir: Path, result: dict) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    (workdir / "result.json").write_text(json.dumps(result, default=repr))
    os._exit(0)  # no atexit handlers or finalizers the objective may have registered


if __name__ == "__main__":
    main(Path(sys.argv[1]))
