"""What a result records about where it was computed, so that a cell can be reproduced."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

PACKAGES = ("objective-harness", "torch", "numpy", "scipy", "scikit-learn")


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
    }
