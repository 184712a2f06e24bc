"""Prints 1 GB to stdout while the module loads.

Expected: the output cap kills it quickly: ``killed``, reason ``output``.
"""

import sys

chunk = "x" * (1 << 20)
for _ in range(1024):
    sys.stdout.write(chunk)
raise RuntimeError("printed 1 GiB and was never stopped: the output cap is not enforced")
