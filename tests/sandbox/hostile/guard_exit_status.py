"""Chooses how its own refusal ends: the guard's closure holds os._exit, but it reads the
exit status and the stderr marker from module globals (sandbox_guard.VIOLATION_EXIT and
MARKER) at the moment it refuses. Per case (``__HOSTILE_PARAM__``):

- ``status``: sets VIOLATION_EXIT to 3, then reads /etc/passwd when the module loads;
- ``after_report``: replaces os._exit (which the child calls once result.json and
  outputs.npz are written) by a function that sets VIOLATION_EXIT to that same status
  and MARKER to something harmless, then reads /etc/passwd - training itself is honest.

Expected: the refusal ends the child either way (nothing is read, nothing after it runs)
and the cell is ``killed``/``violation`` naming /etc/passwd.
"""

import os

import torch.nn.functional as F

from harness.sandbox import guard as sandbox_guard

if "__HOSTILE_PARAM__" == "status":
    sandbox_guard.VIOLATION_EXIT = 3
    with open("/etc/passwd") as f:
        print("read /etc/passwd:", f.read(20), flush=True)
    print("still running after the refusal", flush=True)
else:
    def _after_the_report(status):
        sandbox_guard.VIOLATION_EXIT, sandbox_guard.MARKER = status, "nothing to see: "
        with open("/etc/passwd") as f:
            print("read /etc/passwd:", f.read(20), flush=True)

    os._exit = _after_the_report


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
