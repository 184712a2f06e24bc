"""The pids and memory cgroups of one sandboxed job, made by the fork server
(:mod:`harness.sandbox.zygote`) before the job's namespaces: every process and thread of
the job counts against ``pids.max``, every page it (or its tmpfs) uses against its memory
limit, swap not extra. cgroup v1 (one cgroup per controller, under this process's own
memory cgroup) or v2 (one with both), where the machine lets this process create them; a
controller it cannot have is left out and the launch says so (``pids_cgroup``,
``memory_cgroup``: :data:`harness.sandbox.layers.LIMITS`).
"""

from __future__ import annotations

import os
import time

CGROUP_V1_PIDS = "/sys/fs/cgroup/pids"
CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"
CGROUP_V2 = "/sys/fs/cgroup"


def create(request: dict) -> dict[str, str | None]:
    """The job's fresh cgroups, where the machine lets this process create them: ``pids``
    (processes and threads at most ``RLIMIT_NPROC``) and ``memory`` (the job's memory limit:
    ``memory_bytes``, else ``RLIMIT_AS``; no swap). cgroup v1: one per controller; v2: one
    with both."""
    limits = request["limits"]
    nproc = int(_first(limits.get("RLIMIT_NPROC", 256)))
    memory = request.get("memory_bytes") or limits.get("RLIMIT_AS")
    name = f"harness-sandbox/{os.getpid()}-{time.monotonic_ns()}"
    if os.path.exists(os.path.join(CGROUP_V1_PIDS, "cgroup.procs")) or os.path.exists(
            os.path.join(CGROUP_V1_MEMORY, "cgroup.procs")):
        pids = _v1_cgroup(CGROUP_V1_PIDS, "/", name, {"pids.max": nproc})
        memory_path = None
        if memory is not None:  # under this process's own memory cgroup: its limit holds too
            limit = int(_first(memory))
            memory_path = _v1_cgroup(CGROUP_V1_MEMORY, _own_cgroup("memory"), name, {
                "memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit,
                "memory.swappiness": 0}, optional=("memory.memsw.limit_in_bytes",
                                                   "memory.swappiness"))
        return {"pids": pids, "memory": memory_path}
    return _v2_cgroup(name, nproc, None if memory is None else int(_first(memory)))


def _first(value: object) -> object:
    return value[0] if isinstance(value, list | tuple) else value


def _own_cgroup(controller: str) -> str:
    """This process's cgroup (v1) of ``controller``, as /proc/self/cgroup names it."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    return path or "/"
    except OSError:
        pass
    return "/"


def _v1_cgroup(root: str, own: str, name: str, settings: dict[str, int],
               optional: tuple[str, ...] = ()) -> str | None:
    if not os.path.exists(os.path.join(root, "cgroup.procs")):
        return None
    base = os.path.join(root, own.lstrip("/"))
    if not os.path.isdir(base):  # our cgroup is not visible here (another cgroup namespace)
        base = root
    path = os.path.join(base, name)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path)
        for key, value in settings.items():
            try:
                with open(os.path.join(path, key), "w") as f:
                    f.write(str(value))
            except OSError:
                if key not in optional:
                    raise
        return path
    except OSError:
        remove(path)
        return None


def _v2_cgroup(name: str, nproc: int, memory: int | None) -> dict[str, str | None]:
    """One cgroup v2 for the job, with ``pids`` and ``memory`` where they can be enabled
    (from the root down to its parent: a v2 cgroup with processes cannot delegate)."""
    none: dict[str, str | None] = {"pids": None, "memory": None}
    if not os.path.exists(os.path.join(CGROUP_V2, "cgroup.procs")):
        return none
    path = os.path.join(CGROUP_V2, name)
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        wanted = ["pids"] + (["memory"] if memory is not None else [])
        enabled = []
        for controller in wanted:
            try:
                for level in (CGROUP_V2, parent):
                    with open(os.path.join(level, "cgroup.subtree_control"), "w") as f:
                        f.write(f"+{controller}")
                enabled.append(controller)
            except OSError:
                continue
        if not enabled:
            return none
        os.mkdir(path)
        out = dict(none)
        if "pids" in enabled:
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(nproc))
            out["pids"] = path
        if "memory" in enabled:
            with open(os.path.join(path, "memory.max"), "w") as f:
                f.write(str(memory))
            try:
                with open(os.path.join(path, "memory.swap.max"), "w") as f:
                    f.write("0")
            except FileNotFoundError:  # no swap accounting: no swap to extend it either
                pass
            out["memory"] = path
        return out
    except OSError:
        remove(path)
        return none


def remove(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # its last processes are still being torn down
            time.sleep(0.02)

