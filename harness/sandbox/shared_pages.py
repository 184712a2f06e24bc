"""Writable shared memory a process holds: a fork server must hold none.

fork keeps ``MAP_SHARED`` mappings: a page mapped writable and shared in the fork server is
the same physical page in every job forked from it, whatever objective each job runs —
a channel between jobs and a lock one job can take from all the others (an unlinked POSIX
semaphore in ``/dev/shm`` survives as such a mapping; the IPC namespace, seccomp and
Landlock do not cover what was already mapped). The fork server and every job check
their own maps before they serve and refuse if there is any.
"""

from __future__ import annotations

# Device mappings a CUDA context makes in the job itself (never inherited: the fork server
# does not touch CUDA).
_OWN_DEVICES = ("/dev/nvidia",)


def writable_shared(maps: str | None = None) -> list[str]:
    """The lines of ``/proc/self/maps`` (or of ``maps``) that map memory writable and
    shared."""
    if maps is None:
        with open("/proc/self/maps") as f:
            maps = f.read()
    found = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 2:
            continue
        perms = fields[1]
        path = fields[5].strip() if len(fields) > 5 else ""
        if "w" in perms and perms.endswith("s") and not path.startswith(_OWN_DEVICES):
            found.append(line.strip())
    return found


def thread_locks_only() -> None:
    """tqdm (which ``torch.export`` uses) guards its bars with a ``multiprocessing.RLock``,
    a semaphore in a shared page, the first time a bar is made: from here on it takes its
    thread lock alone."""
    from tqdm import std

    std.TqdmDefaultWriteLock.mp_lock = None  # create_mp_lock only fills a missing one
