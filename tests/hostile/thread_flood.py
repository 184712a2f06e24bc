"""Starts 512 threads (small stacks, each sleeping briefly) under a 64-process limit: the
harmless, bounded version of a thread bomb that would exhaust the machine's pids.

Expected: the process limit (threads count) stops it: a failed cell naming threads.
"""

import threading
import time

import torch.nn.functional as F

threading.stack_size(1 << 16)
threads = [threading.Thread(target=time.sleep, args=(2,)) for _ in range(512)]
for t in threads:
    t.start()
print(f"{threading.active_count()} threads running")
for t in threads:
    t.join()


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
