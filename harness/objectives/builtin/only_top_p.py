"""OnlyTopP-q: MAE ("-p") only where p_y >= q, from Beyond Log-Likelihood (Li et al. 2025).

Samples with ``p_y < q`` (which, under label noise, are mostly the mislabelled ones)
contribute zero loss and zero gradient.

Search space: q in [0, 0.1] (ours): from MAE (q = 0) to chance level 1/K for the suite's K =
10; the reference's percentile-based q has no classifier analogue.
"""

import torch

SEARCH_SPACE = {
    "q": {"low": 0.0, "high": 0.1},
}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, q: float = 0.05
) -> torch.Tensor:
    """OnlyTopP-q: ``(1 - p_y) * 1[p_y >= q]``; q=0 is MAE.

    Default q=0.05. The reference sets q per run to a percentile of a pretrained LM's
    token probabilities (e.g. 0.175 for the 10th percentile), which does not transfer
    to a classifier trained from scratch, whose ``p_y`` starts near 1/K. An absolute
    q above 1/K would mask most samples at initialisation and stall training, so the
    default sits at half the chance level for K=10 (the default digits suites): nothing
    is masked at the start, and later only samples the model puts well below chance
    are dropped. For K > 20 pass a smaller q. The reference divides the summed loss by
    the number of kept tokens; here the harness's per-sample mean divides by B.
    Source: GaotangLi/Beyond-Log-Likelihood ``fsdp_sft_trainer.py`` (``OnlyTopP``).
    """
    p_y = logits.softmax(-1).gather(-1, targets[:, None]).squeeze(-1)
    return (1 - p_y) * (p_y >= q).to(p_y.dtype)
