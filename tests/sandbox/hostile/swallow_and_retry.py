"""Swallows every exception (BaseException included) around one forbidden thing per case
(``__HOSTILE_PARAM__``: reading /etc/shadow, a socket, a fork, writing to /tmp, ctypes),
retried on every training step, then returns a good loss so that training succeeds.

Expected: a refusal cannot be swallowed: the first one ends the child at once,
``killed``/``violation`` naming that attempt; training never completes and nothing is
written outside.
"""

import ctypes
import os
import socket

import torch.nn.functional as F

ESCAPE = "__HOSTILE_ESCAPE__"
ATTEMPT = {
    "shadow": lambda: open("/etc/shadow").read(),
    "socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    "fork": lambda: os.fork(),
    "write": lambda: open(ESCAPE, "w"),
    "ctypes": lambda: ctypes.CDLL("libc.so.6"),
}["__HOSTILE_PARAM__"]
steps = 0


def classification_loss(logits, targets):
    global steps
    steps += 1
    try:
        ATTEMPT()
    except BaseException:  # noqa: B036 - the attack: swallow everything, keep going
        pass
    print(f"step {steps}: still training after the attempt", flush=True)
    return F.cross_entropy(logits, targets, reduction="none")
