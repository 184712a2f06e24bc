"""The engine's built-in objectives: classification losses, one module each, written like a
user's objective (formula and source in the docstring). Suites keep their own baselines in
their ``baselines/`` folder; :func:`harness.contract.registry.builtins` lists them all."""

# Display order: the reference (cross-entropy) first.
ORDER = (
    "ce", "mae", "gce", "sce", "nce_rce", "focal", "taylor_ce", "poly1", "boot_soft",
    "boot_hard", "label_smoothing", "ldr_kl", "aldr_kl", "squentropy", "only_top_p",
    # calibration-oriented training losses and proper scoring rules
    "focal3", "flsd53", "dual_focal", "brier", "spherical", "mmce",
)
