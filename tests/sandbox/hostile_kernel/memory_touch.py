"""Allocates and touches ``bound`` bytes (1 GiB) in 32 MiB blocks, saying how far it got
after each, under an address-space limit far above that: only a memory cgroup stops it.
With ``hold``, it then keeps what it holds for that many seconds (a job's other process).

Expected: the job's memory cgroup: the kernel kills it (SIGKILL) once it holds about the
limit, long before ``bound``; it never says "done".
"""

import json
import time

PARAMS: dict = {}  # the test puts its parameters here
blocks = []
for i in range(PARAMS["bound"] >> 25):
    blocks.append(b"\1" * (32 << 20))  # written, so every page is really there
    print(f"held {(i + 1) * 32} MiB", flush=True)
if PARAMS.get("hold"):
    print("holding", flush=True)
    time.sleep(PARAMS["hold"])
print("RESULT " + json.dumps({"done": True}), flush=True)
raise RuntimeError("RESULT done")
