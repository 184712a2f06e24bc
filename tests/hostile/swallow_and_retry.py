"""Swallows every exception and keeps trying forbidden things on every training step
(reading /etc/shadow, a socket, a fork, writing to /tmp, ctypes), then returns a good loss,
so that training itself succeeds.

Expected: refusals are recorded even when swallowed: ``killed``/``violation``, with the
attempts listed in the error.
"""

import ctypes
import os
import socket

import torch.nn.functional as F

ATTEMPTS = [
    lambda: open("/etc/shadow").read(),
    lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    lambda: os.fork(),
    lambda: open("/tmp/harness-swallowed-escape", "w"),
    lambda: ctypes.CDLL("libc.so.6"),
]


def classification_loss(logits, targets):
    for attempt in ATTEMPTS:
        try:
            attempt()
        except BaseException:  # noqa: B036 - the attack: swallow everything, keep going
            pass
    return F.cross_entropy(logits, targets, reduction="none")
