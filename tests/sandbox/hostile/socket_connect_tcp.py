"""Opens a TCP connection to a server the test runs on 127.0.0.1 and sends a token.

Expected: refused (guard: opening a network socket; kernel: a new network namespace and
Landlock's TCP rules): ``killed``/``violation``; the test's server accepts nothing.
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
