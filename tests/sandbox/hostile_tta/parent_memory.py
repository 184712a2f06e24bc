"""A tta_loss that reads the trainer's memory through /proc (its parent's mem and environ),
where the stream's labels do live.

Expected: refused (``killed``/``violation``) by the guard; by the kernel layers alone, the
trainer is not in the sandbox's PID namespace and /proc/<pid>/mem is unreadable.
"""

import os

try:
    with open(f"/proc/{os.getppid()}/mem", "rb") as f:
        print(f"read {len(f.read(64))} bytes of the parent", flush=True)
except OSError as exc:
    print(f"parent memory: {type(exc).__name__}", flush=True)


def tta_loss(logits):
    return -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
