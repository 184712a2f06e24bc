"""What a suite declares and the engine checks: the suite, its pipeline's interface, jobs,
trainer outputs, chunks of seeds, seed streams, held-out variants, and the registry that
finds suites and built-in objectives. Declarations only: running cells is :mod:`harness.runner`."""
