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
    with both. With ``job`` (a run's processes), the memory cgroup sits in that job's parent
    cgroup, limited to ``job_memory_bytes``: what all of them hold together."""
    limits = request["limits"]
    nproc = int(_first(limits.get("RLIMIT_NPROC", 256)))
    memory = request.get("memory_bytes") or limits.get("RLIMIT_AS")
    job, job_memory = request.get("job"), request.get("job_memory_bytes")
    parent = f"harness-sandbox/{job}" if job and job_memory else "harness-sandbox"
    name = f"{parent}/{os.getpid()}-{time.monotonic_ns()}"
    if os.path.exists(os.path.join(CGROUP_V1_PIDS, "cgroup.procs")) or os.path.exists(
            os.path.join(CGROUP_V1_MEMORY, "cgroup.procs")):
        pids = _v1_cgroup(CGROUP_V1_PIDS, "/", name, {"pids.max": nproc})
        memory_path = None
        if memory is not None:  # under this process's own memory cgroup: its limit holds too
            own = _own_cgroup("memory")
            if parent != "harness-sandbox" and not _v1_cgroup(
                    CGROUP_V1_MEMORY, own, parent, _v1_memory(int(job_memory)),
                    optional=_V1_OPTIONAL, exist_ok=True):
                return {"pids": pids, "memory": None}
            memory_path = _v1_cgroup(CGROUP_V1_MEMORY, own, name,
                                     _v1_memory(int(_first(memory))), optional=_V1_OPTIONAL)
        return {"pids": pids, "memory": memory_path}
    return _v2_cgroup(name, nproc, None if memory is None else int(_first(memory)),
                      int(job_memory) if parent != "harness-sandbox" else None)


_V1_OPTIONAL = ("memory.memsw.limit_in_bytes", "memory.swappiness")


def _v1_memory(limit: int) -> dict[str, int]:
    return {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit,
            "memory.swappiness": 0}


def remove_job(path: str) -> None:
    """Remove the job's parent cgroup of the process cgroup ``path`` once it is empty (the
    job's last process to end does it; an earlier one finds it busy and leaves it)."""
    parent = os.path.dirname(path)
    if os.path.basename(os.path.dirname(parent)) == "harness-sandbox":
        try:
            os.rmdir(parent)
        except OSError:
            pass


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
               optional: tuple[str, ...] = (), exist_ok: bool = False) -> str | None:
    """The cgroup ``name`` under ``own`` with ``settings``; with ``exist_ok`` one that
    exists already is taken as it is (another process of its job made and set it)."""
    if not os.path.exists(os.path.join(root, "cgroup.procs")):
        return None
    base = os.path.join(root, own.lstrip("/"))
    if not os.path.isdir(base):  # our cgroup is not visible here (another cgroup namespace)
        base = root
    path = os.path.join(base, name)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            if exist_ok:
                return path
            raise
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


def _v2_cgroup(name: str, nproc: int, memory: int | None,
               job_memory: int | None = None) -> dict[str, str | None]:
    """One cgroup v2 for the job, with ``pids`` and ``memory`` where they can be enabled
    (from the root down to its parent: a v2 cgroup with processes cannot delegate); with
    ``job_memory``, its parent (the job's) is limited to that."""
    none: dict[str, str | None] = {"pids": None, "memory": None}
    if not os.path.exists(os.path.join(CGROUP_V2, "cgroup.procs")):
        return none
    path = os.path.join(CGROUP_V2, name)
    parent = os.path.dirname(path)
    levels = [CGROUP_V2, os.path.dirname(parent), parent] if job_memory else [CGROUP_V2, parent]
    try:
        os.makedirs(os.path.dirname(parent), exist_ok=True)
        try:
            os.mkdir(parent)
            made = True
        except FileExistsError:  # another process of the job made (and limited) it
            made = False
        wanted = ["pids"] + (["memory"] if memory is not None else [])
        enabled = []
        for controller in wanted:
            try:
                for level in levels:
                    with open(os.path.join(level, "cgroup.subtree_control"), "w") as f:
                        f.write(f"+{controller}")
                enabled.append(controller)
            except OSError:
                continue
        if job_memory and made and "memory" in enabled:
            with open(os.path.join(parent, "memory.max"), "w") as f:
                f.write(str(job_memory))
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

