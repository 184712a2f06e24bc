"""Starts grandchildren meant to outlive the cell: os.fork (the child sleeps in a directory
named after a marker), os.posix_spawn, subprocess with start_new_session, and
multiprocessing - every one carrying the marker in its cwd or arguments.

Expected: the guard refuses them all: ``killed``/``violation``; no process with the marker
exists after the call.
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


attempts = [
    _fork,
    lambda: os.posix_spawn("/bin/sleep", ["sleep", "600", MARKER], {}),
    lambda: subprocess.Popen(["sleep", "600", MARKER], start_new_session=True),
    lambda: multiprocessing.get_context("fork").Process(target=_sleeper).start(),
]
errors = []
for attempt in attempts:
    try:
        attempt()
    except Exception as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
