"""A fork bomb, bounded so that it cannot hurt the machine even if containment failed: one
way of starting processes per case (``__HOSTILE_PARAM__``): forking in a loop (each child
exits at once), os.posix_spawn, subprocess, multiprocessing or pty.fork.

Expected: the guard refuses the first attempt and that refusal ends the child:
``killed``/``violation`` naming the refused call (os.fork, os.posix_spawn,
subprocess.Popen, os.fork again under multiprocessing, os.forkpty); nothing after it runs
and no process survives. (Without the guard, kernel_grandchild_fork: seccomp refuses.)
"""

import multiprocessing
import os
import pty
import subprocess

import torch.nn.functional as F

WAY = "__HOSTILE_PARAM__"


def _fork_loop():
    for _ in range(64):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


def _posix_spawn():
    os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)


def _subprocess():
    subprocess.run(["true"], check=False)


def _multiprocessing():
    p = multiprocessing.get_context("fork").Process(target=os.getpid)
    p.start()
    p.join()


def _pty():
    pid, _ = pty.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


WAYS = {"fork": _fork_loop, "posix_spawn": _posix_spawn, "subprocess": _subprocess,
        "multiprocessing": _multiprocessing, "pty": _pty}
try:
    WAYS[WAY]()
except BaseException as exc:  # noqa: BLE001 - a refusal cannot be caught; anything else can
    print(f"{WAY}: failed: {type(exc).__name__}: {exc}", flush=True)
print(f"{WAY}: still running after the attempt", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
