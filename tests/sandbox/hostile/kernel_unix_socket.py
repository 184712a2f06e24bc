"""Run without the Python guard: connects to a Unix-domain socket the test listens on
outside the sandbox (a stand-in for /var/run/postgresql/.s.PGSQL.5432 or a Redis socket)
and sends a token; also a datagram to a second one.

Expected: the seccomp filter refuses socket() itself (EPERM): ``failed``/``objective``
with "Operation not permitted"; the test's sockets receive nothing.
"""

import socket

import torch.nn.functional as F

UNIX_SOCKET = "__HOSTILE_UNIX_SOCKET__"
MARKER = "__HOSTILE_MARKER__"

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stream:
    stream.settimeout(5)
    stream.connect(UNIX_SOCKET)
    stream.sendall(MARKER.encode())
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as datagram:
    datagram.sendto(MARKER.encode(), UNIX_SOCKET + ".dgram")
print("connected and sent through both sockets")


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
