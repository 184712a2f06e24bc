"""Run without the Python guard: connects over TCP to the test's server on 127.0.0.1.

Expected: the seccomp filter refuses socket() itself (EPERM; behind it, the network
namespace has only a down loopback and Landlock refuses TCP connect): ``failed``/
``objective`` with "Operation not permitted"; the server accepts nothing.
"""

import socket

import torch.nn.functional as F

PORT = int("__HOSTILE_TCP_PORT__")

with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as conn:
    conn.settimeout(5)
    conn.connect(("127.0.0.1", PORT))
    conn.sendall(b"__HOSTILE_MARKER__")


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
