"""The target row: no unlearning at all, the model before any forgetting step.

``L = 0 · Σ forget.logits``: a loss whose value and gradient are exactly zero but which
still depends on the trained model's logits, so the trusted trainer runs its usual step
(a loss with no graph would be refused, and skipping the step would be a special case).
With a zero gradient AdamW's moments stay 0 and its adaptive update is 0/(0 + ε) = 0: the
parameters move only by the optimizer's decoupled weight decay (``θ ← θ − lr·wd·θ``), if
the suite sets one; with ``weight_decay = 0`` the model stays bit-for-bit the target.
The row reports the metrics of the model every method starts from (TOFU's "target" /
open-unlearning's ``tofu_<model>_full`` before unlearning). No hyperparameters.
Source: Maini et al., "TOFU: A task of fictitious unlearning for LLMs" (COLM 2024).
"""


def unlearning_loss(forget, retain):
    """Exactly 0, with an exactly zero gradient w.r.t. ``forget.logits``."""
    return forget.logits.sum() * 0.0
