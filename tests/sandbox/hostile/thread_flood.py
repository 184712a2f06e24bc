"""Starts up to 512 threads (small stacks, each sleeping briefly) under a 64-process limit:
the harmless, bounded version of a thread bomb that would exhaust the machine's pids.
Prints how many it got before the first refusal.

Expected: the job's pids cgroup (threads count) stops it near the limit: a ``failed``
cell (``objective``: RuntimeError "can't start new thread").
"""

import threading
import time

import torch.nn.functional as F

threading.stack_size(1 << 16)
started = []
try:
    for _ in range(512):
        thread = threading.Thread(target=time.sleep, args=(1,))
        thread.start()
        started.append(thread)
finally:
    print(f"threads started: {len(started)}")
for thread in started:
    thread.join()


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
