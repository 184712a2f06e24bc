"""Sleeps (1000 s) past the wall-clock limit, using no CPU.

Expected: the parent's wall-clock limit kills it: ``timeout``, reason ``wall``, promptly.
"""

import time

time.sleep(1000)
