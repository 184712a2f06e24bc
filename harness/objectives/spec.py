"""The objective contract: what a hook is and what it may ask for.

An objective is a Python module defining one or more hooks. A hook is a plain
function over tensors. Its keyword-only parameters with defaults are the
objective's hyperparameters, except the *context* names its :class:`HookSpec` lists,
which the suite fills in when the hook asks for them by name.

The engine defines the hooks every classification suite shares (``ENGINE_HOOKS``);
a suite that introduces a hook of its own declares its ``HookSpec`` in its
``Suite.hook_specs``, and :func:`harness.contract.registry.hooks` merges them all.
"""

from __future__ import annotations

from dataclasses import dataclass

# Context a classification hook receives only if its signature names it.
#   progress: float in [0, 1], the fraction of training done (for schedules).
#   state:    FloatTensor [B], this batch's slice of a per-sample memory kept for the
#             member by the trainer, NaN until first written; write it in place under
#             torch.no_grad() (ALDR-KL's lambdas) and the trainer stores it back.
# No sample indices: a hook cannot tell which training samples it is given, so it cannot
# look anything up about them (clean labels it was shipped with, another member's labels).
CONTEXT_NAMES = ("progress", "state")


@dataclass(frozen=True)
class HookSpec:
    """One hook: its positional tensors, the context it may ask for, and its smoke test.

    ``smoke`` is ``"module:function"`` of the validator's check for this hook, called as
    ``check(objective, hook) -> list[Problem]`` (see :mod:`harness.objectives.validate`,
    whose ``check_loss_hook`` does the work for any loss-like hook).
    """

    name: str
    positional: tuple[str, ...]
    summary: str
    smoke: str
    context: tuple[str, ...] = CONTEXT_NAMES
    # Context the hook writes in place, which the trainer stores back after the call.
    mutable: tuple[str, ...] = ("state",)
    # Context that is one value per member rather than one row per sample (a memory, the
    # parameters): the sandbox never reorders its rows.
    shared: tuple[str, ...] = ()


ENGINE_HOOKS: tuple[HookSpec, ...] = (
    HookSpec(
        "classification_loss",
        ("logits", "targets"),
        "(logits[B, C], targets[B]) -> per-sample loss [B] or a scalar",
        smoke="harness.objectives.validate:check_classification_loss",
    ),
)
