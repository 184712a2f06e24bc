"""Keeps running past a refusal: fills a pipe, points file descriptor 2 (where the guard
writes each refusal before it ends the process) at that full pipe, and reads /etc/passwd
in a daemon thread. The guard's write blocks forever, so its os._exit never comes; the
main thread puts stderr back, monkeypatches json.dumps so that the report the child
writes lists no violations, and trains normally.

Expected: nothing is read (the hook never returns to the read), and the refusal still
ends the child: ``killed``/``violation`` naming /etc/passwd.
"""

import json
import os
import threading

import torch.nn.functional as F

r, w = os.pipe()
os.set_blocking(w, False)
try:
    while True:
        os.write(w, b"x" * 65536)
except BlockingIOError:
    pass  # full
os.set_blocking(w, True)
saved = os.dup(2)
os.dup2(w, 2)


def _attempt():
    with open("/etc/passwd") as f:
        print("read /etc/passwd:", f.read(20), flush=True)


thread = threading.Thread(target=_attempt, daemon=True)
thread.start()
thread.join(1.0)
os.dup2(saved, 2)
print(f"refusing thread still blocked: {thread.is_alive()}", flush=True)
_dumps = json.dumps
json.dumps = lambda report, **kw: _dumps({**report, "violations": []}, **kw)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
