"""Fills the disk: writes 8 MiB files into its working directory in a loop (bounded at
4 GiB so that a broken quota cannot fill the machine).

Expected: the parent's disk quota kills it: ``killed``, reason ``disk``.
"""

chunk = bytes(1 << 20)
for i in range(512):
    with open(f"fill-{i}.bin", "wb") as f:
        for _ in range(8):
            f.write(chunk)
raise RuntimeError("wrote 4 GiB and was never stopped: the disk quota is not enforced")
