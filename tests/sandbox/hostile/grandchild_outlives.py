"""Starts a grandchild meant to outlive the cell, one way per case (``__HOSTILE_PARAM__``):
os.fork (the child sleeps in a directory named after a marker), os.posix_spawn,
subprocess with start_new_session, or multiprocessing - each carrying the marker in its
cwd or arguments.

Expected: the guard refuses it and ends the child: ``killed``/``violation`` (starting or
forking a process); no process with the marker exists after the call.
"""

import multiprocessing
import os
import subprocess
import time

import torch.nn.functional as F

MARKER = "__HOSTILE_MARKER__"


def _sleeper():
    os.mkdir(MARKER)
    os.chdir(MARKER)
    time.sleep(600)


def _fork():
    if os.fork() == 0:
        try:
            _sleeper()
        finally:
            os._exit(0)


attempt = {
    "fork": _fork,
    "posix_spawn": lambda: os.posix_spawn("/bin/sleep", ["sleep", "600", MARKER], {}),
    "subprocess": lambda: subprocess.Popen(["sleep", "600", MARKER], start_new_session=True),
    "multiprocessing": lambda: multiprocessing.get_context("fork").Process(
        target=_sleeper).start(),
}["__HOSTILE_PARAM__"]
attempt()
print("still running after the attempt", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
