"""Tries to keep running past a refusal by holding back the guard's report, then reads
/etc/passwd in a daemon thread, while the main thread waits a second and goes on
training. One way per case (``__HOSTILE_PARAM__``):

- ``replaced``: fills a pipe of its own and points descriptors 2 and 4 (stderr, and the
  guard's report pipe) at it, so that a report written there would block forever and the
  guard's exit never come;
- ``flooded``: keeps the worker's real report pipe busy from a second thread, writing
  64 KiB blocks into it as fast as it can.

Expected: the guard writes its report only to the report pipe it was given at install
time (it checks the descriptor is still that pipe) and without blocking, then ends the
server whatever the write did: nothing is read, nothing after the refusal runs, and the
cell is ``killed``/``violation``; with the report pipe replaced, the error says that the
report was hidden.
"""

import os
import threading

import torch.nn.functional as F

if "__HOSTILE_PARAM__" == "replaced":
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 65536)
    except BlockingIOError:
        pass  # full
    os.set_blocking(w, True)
    os.dup2(w, 2)
    os.dup2(w, 4)
else:
    def _flood():
        block = b"x" * 65536
        while True:
            os.write(4, block)

    threading.Thread(target=_flood, daemon=True).start()


def _attempt():
    with open("/etc/passwd") as f:
        print("read /etc/passwd:", f.read(20), flush=True)


thread = threading.Thread(target=_attempt, daemon=True)
thread.start()
thread.join(1.0)
print(f"refusing thread still blocked: {thread.is_alive()}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
