"""Sends a pickle to the worker: its first reply is a frame whose header is a raw pickle
(not JSON) and whose payload is another; unpickling either would create a marker file
outside the sandbox. Otherwise plain cross-entropy.

Expected: the worker parses a reply header as JSON only (and reads the payload as raw
numbers of the sizes it computed): the header is not JSON, the cell is ``failed``/
``invalid-output``, and the payload never runs (no marker).
"""

import os
import pickle
import struct

import torch.nn.functional as F

MARKER = "__HOSTILE_PICKLE_MARKER__"


class Payload:
    def __reduce__(self):
        return (open, (MARKER, "w"))


sent = False


def classification_loss(logits, targets):
    global sent
    if not sent:
        sent = True
        header = pickle.dumps({"ok": Payload()})
        os.write(3, struct.pack("<I", len(header)) + header + pickle.dumps(Payload()))
    return F.cross_entropy(logits, targets, reduction="none")
