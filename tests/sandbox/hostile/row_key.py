"""Goes for the secret the rows of each batch are permuted with (``HARNESS_SANDBOX_KEY``,
else ``sandbox.key`` in the worker's data directory): with it, and the public data order,
a hook could tell which row is which sample and train on clean labels shipped in its
file (tests/sandbox/cheats/order_labels.py). Looks in its environment, then reads the key file
where the worker keeps it (``__HOSTILE_KEY_FILE__``); with the guard off (@kernel) it
swallows the error and trains.

Expected: the environment is scrubbed (no key); the key file is outside every read root:
with the guard, reading it is refused and ends the server (``killed``/``violation``
naming the file); without, the kernel answers ENOENT or EACCES and the cell trains
(``ok``). The key never shows in any output.
"""

import os

import torch.nn.functional as F

KEY_FILE = "__HOSTILE_KEY_FILE__"

print("environment key:", os.environ.get("HARNESS_SANDBOX_KEY"), flush=True)
try:
    with open(KEY_FILE, "rb") as f:
        print("key file:", f.read(), flush=True)
except OSError as exc:
    print(f"key file: refused [Errno {exc.errno}] {exc.strerror}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
