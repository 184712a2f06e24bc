"""Spins forever on the CPU while the module loads.

Expected: the CPU-time limit kills it: ``killed``, reason ``cpu``.
"""

while True:
    pass
