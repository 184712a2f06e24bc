"""The objective contract: which hooks exist and what a hook may ask for.

An objective is a Python module defining one or more hooks. A hook is a plain
function over tensors. Its keyword-only parameters with defaults are the
objective's hyperparameters, except the *context* names below, which the suite
fills in when the hook asks for them by name.
"""

from __future__ import annotations

from dataclasses import dataclass

# Context a hook receives only if its signature names it (each hook lists its own).
#   progress: float in [0, 1], the fraction of training done (for schedules).
#   index:    LongTensor [B], the batch's indices into the training set.
#   state:    FloatTensor [N], per-sample memory for this seed, NaN until first
#             written; write it in place under torch.no_grad() (ALDR-KL's lambdas).
CONTEXT_NAMES = ("progress", "index", "state")


@dataclass(frozen=True)
class HookSpec:
    name: str
    positional: tuple[str, ...]
    summary: str
    context: tuple[str, ...] = CONTEXT_NAMES


HOOKS: dict[str, HookSpec] = {
    "classification_loss": HookSpec(
        "classification_loss",
        ("logits", "targets"),
        "(logits[B, C], targets[B]) -> per-sample loss [B] or a scalar",
    ),
}
