"""A fork bomb, bounded so that it cannot hurt the machine even if containment failed: forks
in a loop (each child exits at once), then tries os.posix_spawn, subprocess, multiprocessing
and pty.fork.

Expected: the guard refuses every way of starting a process: ``killed``/``violation``.
"""

import multiprocessing
import os
import pty
import subprocess

import torch.nn.functional as F


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


errors = []
for attempt in (_fork_loop, _posix_spawn, _subprocess, _multiprocessing, _pty):
    try:
        attempt()
    except Exception as exc:
        errors.append(exc)
print(f"{len(errors)} of 5 ways of starting a process failed")
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
