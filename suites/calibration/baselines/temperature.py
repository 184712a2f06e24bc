"""Temperature scaling (Guo et al. 2017, "On calibration of modern neural networks")."""

import torch

from suites.calibration import metrics as cal


def posthoc_calibration(val_logits: torch.Tensor, val_targets: torch.Tensor,
                        test_logits: torch.Tensor) -> torch.Tensor:
    """``softmax(z / T)`` with the one T in [0.01, 100] minimizing the validation NLL of
    ``softmax(z / T)`` (``suites.calibration.metrics.fit_temperature``: a bounded Brent search on
    log(1/T), where the NLL is convex; the judge fits its own temperature the same way).
    No hyperparameters. Float64."""
    t = cal.fit_temperature(val_logits.detach().cpu().double().numpy(),
                            val_targets.detach().cpu().numpy())
    return torch.from_numpy(cal.softmax(test_logits.detach().cpu().double().numpy(), t))
