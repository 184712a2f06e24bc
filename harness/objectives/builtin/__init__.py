"""Built-in baseline objectives: one module each, written like a user's objective."""

from __future__ import annotations

from pathlib import Path

# The order is the display order: the reference baseline (CE) first, then the
# classification losses, then the certified-training baselines (certified_loss only).
BUILTIN_NAMES = (
    "ce", "mae", "gce", "sce", "nce_rce", "focal", "taylor_ce", "poly1", "boot_soft",
    "boot_hard", "label_smoothing", "ldr_kl", "aldr_kl", "squentropy", "only_top_p",
    "ibp", "ibp_k0", "crown_ibp", "fast_ibp", "pgd_at",
)

# The certified suite's own baselines (``ce`` trains naturally there: its reference).
CERTIFIED_BASELINES = ("ce", "ibp", "ibp_k0", "crown_ibp", "fast_ibp", "pgd_at")


def builtin_path(name: str) -> Path:
    return Path(__file__).with_name(f"{name}.py")
