"""What a result records about where it was computed, so that a cell can be reproduced."""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

from harness.contract import draws

PACKAGES = ("objective-harness", "torch", "numpy", "scipy", "scikit-learn")


@contextmanager
def using_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block, the process's own setting given
    back after (a kernel may split its sums by thread count: numbers depend on it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def environment(device: str = "cpu") -> dict[str, object]:
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
        "device": device if device == "cpu" else torch.cuda.get_device_name(device),
        "torch_threads": torch.get_num_threads(),
        # the vector unit torch's CPU kernels use: numbers match bit for bit only between
        # machines with the same one (and the same threads, versions and device)
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        # "public", or the fingerprint of the key every stream was drawn from
        "draws": draws.fingerprint(),
    }
