"""Writes outside by the paths the guard checks only by their second argument: os.rename,
os.link and os.symlink whose destination (not source) is outside, and os.open relative to a
directory descriptor of /proc (self/root/etc/passwd). One per case (``__HOSTILE_PARAM__``),
or all of them, each error swallowed, in the kernel-only case (no guard); then trains.

Expected: the guard refuses the destinations of rename, link and symlink, and that
refusal ends the child (``killed``/``violation`` naming the destination). The
dir_fd-relative open's audit event carries no dir_fd, so the guard refuses the descriptor
itself (a directory outside the work directory opened as one). Without the guard, the
kernel refuses all four; nothing appears outside.
"""

import os

import torch.nn.functional as F

ESCAPE = "__HOSTILE_ESCAPE__"
PARAM = "__HOSTILE_PARAM__"

with open("bait.txt", "w") as f:
    f.write("escaped")
ATTEMPTS = {
    "rename": lambda: os.rename("bait.txt", ESCAPE),
    "link": lambda: os.link("bait.txt", f"{ESCAPE}.link"),
    "symlink": lambda: os.symlink("bait.txt", f"{ESCAPE}.symlink"),
    "dir_fd": lambda: os.read(os.open("self/root/etc/passwd", os.O_RDONLY,
                                      dir_fd=os.open("/proc", os.O_RDONLY)), 100),
}
for name in ATTEMPTS if PARAM == "all" else [PARAM]:
    try:
        print(f"{name} succeeded:", ATTEMPTS[name](), flush=True)
    except OSError as exc:
        print(f"{name} failed:", exc, flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
