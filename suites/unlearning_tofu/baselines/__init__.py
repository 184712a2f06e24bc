"""Reference unlearning baselines of the TOFU suite (open-unlearning's methods), one per file."""
