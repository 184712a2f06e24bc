"""Starts a grandchild through _posixsubprocess.fork_exec, which raises no audit event: its
preexec_fn runs Python in the forked process, which makes a marker directory, keeps a file
open in it and sleeps for 10 minutes; then the objective trains normally.

Expected: the guard has replaced every reference to fork_exec by a stub that raises the
``os.fork`` audit event, so the cell is ``killed``/``violation``; without the guard the
seccomp filter would refuse the clone (EPERM). No grandchild ever exists.
"""

import os
import subprocess
import time

import torch.nn.functional as F

MARKER = "__HOSTILE_MARKER__"


def _sleeper():
    os.mkdir(MARKER)
    os.chdir(MARKER)
    with open("held", "w"):
        time.sleep(600)


def _start():
    errpipe_read, errpipe_write = os.pipe()
    return subprocess._fork_exec(  # CPython 3.11's signature (23 arguments)
        [b"/bin/true"], [b"/bin/true"], True, (), None, None, -1, -1, -1, -1, -1, -1,
        errpipe_read, errpipe_write, True, False, -1, None, None, None, -1, _sleeper, False)


print("grandchild started:", _start())
for _ in range(50):  # let it get going before training starts
    if os.path.isdir(MARKER):
        break
    time.sleep(0.1)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
