"""Work that a run's groups share: :func:`once` computes a value once per run and hands it
to every group of the run that asks for it again, in whichever worker process it runs.

Several groups of one run can need the same deterministic work: the calibration suite's
post-hoc track trains the reference's model under every calibrator (the weights of the
reference's own group), and every unlearning objective's judge evaluates the same target
and retain models. In one process a dict is enough; across a local run's worker processes
(:mod:`harness.runner.processes`) the values pass through a private directory that the
run's parent makes and names in ``HARNESS_RUN_MEMO``: one file per key, written under an
exclusive lock, so a process asking while another computes waits for that result instead
of computing it a second time. Without the directory (a Celery worker, one process) each
process keeps its own memo.

Keys must name everything the value depends on; equal keys must give equal values, so the
memo changes no number. Only the trusted side calls it: values are unpickled from the run's
own directory (mode 0700), never from a place a submitted objective can write.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ENV = "HARNESS_RUN_MEMO"
LOCAL_ENTRIES = 64  # values kept in this process, the least recently used dropped first
# (a long-lived worker process must not grow: a calibration run's weights are ~2 MB)

T = TypeVar("T")
_LOCAL: OrderedDict[str, Any] = OrderedDict()


def once(key: str, compute: Callable[[], T]) -> T:
    """``compute()``, or the value an earlier call with ``key`` computed in this run."""
    if key in _LOCAL:
        _LOCAL.move_to_end(key)
        return _LOCAL[key]
    root = os.environ.get(ENV)
    value = _shared(Path(root), key, compute) if root and os.path.isdir(root) else compute()
    _LOCAL[key] = value
    while len(_LOCAL) > LOCAL_ENTRIES:
        _LOCAL.popitem(last=False)
    return value


def _shared(root: Path, key: str, compute: Callable[[], T]) -> T:
    name = hashlib.sha256(key.encode()).hexdigest()
    path = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        if path.exists():
            with path.open("rb") as f:
                return pickle.load(f)
        value = compute()  # raising leaves nothing behind: the next caller computes it
        part = root / f"{name}.part"
        with part.open("wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(part, path)
        return value


def clear_local() -> None:
    """Forget this process's values (tests)."""
    _LOCAL.clear()
