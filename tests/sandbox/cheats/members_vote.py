"""Cheat without a forbidden action: every seed of a variant trains on independently drawn
noisy labels of the same samples, so a majority vote over the members' labels is far
cleaner than any one member's (87.6% against 60% correct at sym-0.4 with 5 seeds). In the
previous protocol all members trained in one process and the hook could pool them. This
one leaves its targets in its home directory (its work directory, writable) and looks for
the other members' files there and in every directory it may list.

Expected: each member's loss runs in its own process with its own work directory, so it
finds only its own file (it prints ``members found: 1``) and trains as plain
cross-entropy: the same score as CE.
"""

import glob
import os

import torch
import torch.nn.functional as F

state = {"done": False}


def classification_loss(logits, targets):
    if not state["done"]:
        state["done"] = True
        home = os.environ.get("HOME", ".")
        torch.save(targets.clone(), os.path.join(home, f"labels-{os.getpid()}.pt"))
        mine = glob.glob(os.path.join(home, "labels-*.pt"))
        print(f"members found: {len(mine)}", flush=True)
    return F.cross_entropy(logits, targets, reduction="none")
