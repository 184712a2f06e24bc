"""Looks for memory it shares with other jobs: every mapping of its own that is writable and
shared (``/proc/self/maps``), which a fork server would hand to every job it forks (a
POSIX semaphore such as tqdm's bar lock is one). In each it first reads what an earlier
job may have left (printed), then leaves its own message and zeroes the first word, which
takes a semaphore from everyone who waits on it. Runs with the guard off (ctypes).

Expected: the job holds no such mapping (it prints ``shared_writable=0``: the fork server
refuses to start with one and a job refuses to serve with one), so it trains as plain
cross-entropy; honest cells run beside it and after it in the same fork server.
"""

import ctypes

import torch.nn.functional as F

MESSAGE = b"HOSTILE-SHARED-PAGE"

shared = []
with open("/proc/self/maps") as f:
    for line in f:
        fields = line.split()
        if "w" in fields[1] and fields[1].endswith("s"):
            shared.append(int(fields[0].split("-")[0], 16))
print(f"shared_writable={len(shared)}", flush=True)
for address in shared:
    earlier = ctypes.string_at(address, len(MESSAGE))
    print(f"read {earlier!r}", flush=True)
    ctypes.memmove(address + 64, MESSAGE, len(MESSAGE))
    ctypes.memset(address, 0, 4)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
