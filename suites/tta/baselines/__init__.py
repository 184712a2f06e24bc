"""Reference test-time adaptation baselines for the TTA suite, one objective module per file."""
