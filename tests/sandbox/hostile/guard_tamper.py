"""Tries to disable the audit-hook guard from inside by clearing the module-level table of
refused events (harness.sandbox.guard._REFUSED.clear()), then, one per case
(``__HOSTILE_PARAM__``), forks a grandchild that sleeps holding a marker, connects to a
Unix socket the test listens on outside the sandbox, or tries TCP to the test's server on
127.0.0.1; then trains normally.

Expected: the guard's state is bound in its closure, so clearing the table changes
nothing: the attempt is refused and ends the child (``killed``/``violation`` naming
os.fork, socket.__new__ or socket.getaddrinfo); nothing reaches either listener and no
grandchild exists.
"""

import os
import socket
import time

import torch.nn.functional as F

from harness.sandbox import guard as sandbox_guard

MARKER = "__HOSTILE_MARKER__"
UNIX_SOCKET = "__HOSTILE_UNIX_SOCKET__"
PORT = int("__HOSTILE_TCP_PORT__")

sandbox_guard._REFUSED.clear()


def _fork():
    pid = os.fork()
    if pid == 0:
        os.mkdir(MARKER)
        os.chdir(MARKER)
        time.sleep(600)
        os._exit(0)
    return pid


def _unix():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(UNIX_SOCKET)
        return s.send(MARKER.encode())


def _tcp():
    with socket.create_connection(("127.0.0.1", PORT), timeout=5) as s:
        return s.send(MARKER.encode())


name = "__HOSTILE_PARAM__"
try:
    print(name, "succeeded:", {"fork": _fork, "unix": _unix, "tcp": _tcp}[name](), flush=True)
except OSError as exc:
    print(name, "failed:", exc, flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
