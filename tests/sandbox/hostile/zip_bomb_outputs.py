"""A size bomb against the worker. There is no outputs.npz to deflate any more; the nearest
thing a server controls is the length prefix of its reply header, the only size the
worker takes from it. Its first hook call writes a prefix declaring a 4 GiB header, then
keeps writing (bounded at 64 MiB) as if the header followed.

Expected: the worker refuses a header over its cap (64 KiB) from the prefix alone, before
allocating anything for it: ``failed``/``invalid-output`` naming the declared size; the
worker's peak memory does not grow by the declared size.
"""

import os
import struct

import torch.nn.functional as F

sent = False


def classification_loss(logits, targets):
    global sent
    if not sent:
        sent = True
        os.write(3, struct.pack("<I", 0xFFFFFFFF))
        chunk = b"[" * (1 << 20)
        for _ in range(64):
            os.write(3, chunk)
    return F.cross_entropy(logits, targets, reduction="none")
