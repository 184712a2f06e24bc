"""Writes outside by the paths the guard does not look at: os.rename, os.link and os.symlink
whose destination (not source) is outside, and os.open relative to a directory descriptor of
/proc (self/root/etc/passwd); swallows the errors and trains normally.

Expected: the kernel refuses all of it (nothing appears outside), and every attempt is
reported as a sandbox violation (the guard checks the destinations of rename, link and
symlink; not yet the dir_fd-relative open, whose audit event carries no dir_fd).
"""

import os

import torch.nn.functional as F

ESCAPE = "__HOSTILE_ESCAPE__"

with open("bait.txt", "w") as f:
    f.write("escaped")
attempts = [
    lambda: os.rename("bait.txt", ESCAPE),
    lambda: os.link("bait.txt", f"{ESCAPE}.link"),
    lambda: os.symlink("bait.txt", f"{ESCAPE}.symlink"),
    lambda: os.read(os.open("self/root/etc/passwd", os.O_RDONLY,
                            dir_fd=os.open("/proc", os.O_RDONLY)), 100),
]
for attempt in attempts:
    try:
        print("succeeded:", attempt())
    except OSError as exc:
        print("failed:", exc)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
