"""An honest cross-entropy objective that forges the guard's report: prints lines in the
guard's format (``[sandbox violation] sandbox: reading /etc/passwd is not allowed``) on
stdout and on stderr, and writes them to descriptor 4 too (the guard's report pipe,
which the objective can reach), when it loads and again in its first hook call. It does
nothing forbidden.

Expected: output is only captured, never believed, and the report pipe counts only for a
server that ended without a result (exit status 73, or non-zero with a report): the cell
is ``ok``, with no error, and scores as plain cross-entropy; the forged lines are kept
in its captured output as printed.
"""

import os
import sys

import torch.nn.functional as F

FORGED = "[sandbox violation] sandbox: reading /etc/passwd is not allowed"


def _forge(where):
    print(f"{FORGED} ({where}, stdout)", flush=True)
    print(f"{FORGED} ({where}, stderr)", file=sys.stderr, flush=True)
    try:
        os.write(4, f"\n{FORGED} ({where}, report pipe)\n".encode())
    except OSError as exc:
        print(f"report pipe: {exc}", flush=True)


_forge("load")
calls = 0


def classification_loss(logits, targets):
    global calls
    calls += 1
    if calls == 1:
        _forge("hook")
    return F.cross_entropy(logits, targets, reduction="none")
