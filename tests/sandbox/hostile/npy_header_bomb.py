"""A memory bomb that passes the size checks: there is no .npy header to lie in any more,
so the server lies with its payload instead. Its first hook call writes a well-formed
``{"ok": true}`` reply header and then streams zeros down the reply pipe, far more than a
reply holds (bounded at 1 GiB), as if the loss and its gradients were that large. It
asks for ``progress`` so that it is served per call (a traced hook's server is only asked
for a graph, and a reply that says ``ok`` to that is refused at once).

Expected: the worker reads exactly the bytes it computed for the reply (a loss and one
gradient), never what the server sends beyond them: the surplus is read as the next
reply's header, which breaks the format: ``failed``/``invalid-output``; the worker's
peak memory does not grow by what was streamed.
"""

import json
import os
import struct

import torch.nn.functional as F

sent = False


def classification_loss(logits, targets, *, progress):
    global sent
    if not sent:
        sent = True
        header = json.dumps({"ok": True}).encode()
        os.write(3, struct.pack("<I", len(header)) + header)
        chunk = bytes(1 << 20)
        for _ in range(1024):
            os.write(3, chunk)
    return F.cross_entropy(logits, targets, reduction="none")
