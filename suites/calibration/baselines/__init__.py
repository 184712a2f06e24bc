"""The calibration suite's post-hoc calibrator baselines, one ``posthoc_calibration`` a file."""
