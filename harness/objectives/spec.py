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

# certified_loss: the above, and (computed only for a hook that names them):
#   eps:      float, the current training radius ε_t in pixel units (0 in the warm-up).
#   eps_max:  float, ε_train, the radius ε_t ramps up to.
#   crown_ibp_worst_logits: a function of no arguments returning [B, C] worst-case
#             logits from CROWN-IBP margin bounds (CROWN with IBP intermediate bounds;
#             worst_logits are IBP's); lazy because it costs ~3 IBP passes: call it
#             only while its weight is non-zero.
#   bounds:   list of (lower, upper) IBP bounds for ONE member: the input box, then the
#             output of every Linear/Conv layer (pre-activation, BatchNorm folded in);
#             the last pair bounds the logits.
#   adv_logits: [B, C] logits on PGD adversarial inputs at ε_t (10 steps on CE).
CERTIFIED_CONTEXT_NAMES = (*CONTEXT_NAMES, "eps", "eps_max", "crown_ibp_worst_logits",
                           "bounds", "adv_logits")


@dataclass(frozen=True)
class HookSpec:
    name: str
    positional: tuple[str, ...]
    summary: str
    context: tuple[str, ...] = CONTEXT_NAMES
    # Hooks a suite needing this one can lift into it (certified_loss from
    # classification_loss with the IBP mixing), so objectives with those run there too.
    lifted_from: tuple[str, ...] = ()


HOOKS: dict[str, HookSpec] = {
    "classification_loss": HookSpec(
        "classification_loss",
        ("logits", "targets"),
        "(logits[B, C], targets[B]) -> per-sample loss [B] or a scalar",
    ),
    "certified_loss": HookSpec(
        "certified_loss",
        ("logits", "worst_logits", "targets"),
        "(logits[B, C], worst_logits[B, C], targets[B]) -> per-sample loss [B] or a scalar",
        context=CERTIFIED_CONTEXT_NAMES,
        lifted_from=("classification_loss",),
    ),
}
