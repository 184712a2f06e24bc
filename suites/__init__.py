"""The project's suites, one package each. Adding a suite is its folder plus its line here
(see docs/adding-a-suite.md); shared code finds suites through :mod:`harness.contract.registry`."""

PACKAGES = (
    "suites.noisy_labels",
    "suites.certified",
    "suites.calibration",
    "suites.tta",
    "suites.unlearning_tofu",
    "suites.unlearning_muse",
)
