"""Where a group trains: its device and its torch threads."""

from __future__ import annotations

import os

from harness.contract.suite import Suite


def training_threads() -> int:
    """Threads a training process of this worker may use (HARNESS_TORCH_THREADS)."""
    value = os.environ.get("HARNESS_TORCH_THREADS")
    if value:
        return max(1, int(value))
    import torch

    return torch.get_num_threads()


def device_for(suite: Suite, variants: list[str]) -> str:
    """``cuda`` for cells routed to the gpu queue when this machine has one, else ``cpu``."""
    wanted = os.environ.get("HARNESS_DEVICE")
    if wanted:
        return wanted
    if suite.queue_for(variants) != "gpu":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


