"""The objective template that ``harness new objective NAME`` writes out.

``TEMPLATE`` is a complete, valid objective file (a temperature-scaled
cross-entropy) whose docstring says what to fill in; ``render(name)`` puts the
objective's name into it.
"""

from __future__ import annotations

PLACEHOLDER = "{name}"

TEMPLATE = '''\
"""{name}: a training objective for Objective Harness (one line, shown in listings).

What to fill in:
  1. Replace this docstring with what {name} is: its formula and, if it has one,
     its source (paper, reference code).
  2. Replace the body of ``classification_loss`` below with your loss. The example
     is a working temperature-scaled cross-entropy, so this file runs as it is.
  3. Hyperparameters are the keyword-only arguments after ``*``, each with a
     default (your recommended value). Override them without editing this file:
         harness run suite {suite} --objective {name}.py --set temperature=2.0
     (``harness ls`` lists the suites; every suite that takes classification_loss
     runs this file.)
  4. Say in SEARCH_SPACE where a tuner may move each hyperparameter: a tuned run
     (``harness run suite {suite} --tuned``) gives every objective the same number of
     trials, drawn from these ranges and the suite's learning rate. Use
     {"low": .., "high": .., "log": True}, int bounds for an int, {"choices": [..]},
     or {"fixed": "why"} for one that is not to be tuned.
  5. Check the file before running anything:
         harness validate {name}.py
"""

import torch
import torch.nn.functional as F

SEARCH_SPACE = {"temperature": {"low": 0.5, "high": 4.0, "log": True}}


def classification_loss(
    logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0
) -> torch.Tensor:
    """Cross-entropy on ``logits / temperature``: ``-log softmax(z / T)_y`` per sample.

    Arguments:
        logits:  float tensor [B, C], the model's raw scores for a batch of B samples
                 over C classes.
        targets: long tensor [B], each sample's (possibly noisy) label in [0, C).
        temperature: a hyperparameter; add your own the same way, after ``*``, each
                 with a default.

    Returns a per-sample loss [B], which the harness averages over the batch, or a
    scalar, which it uses as it is.

    Optional context: add any of these keyword-only arguments (no default needed)
    and the harness passes them in; leave them out and it does not.
        progress: float in [0, 1], the fraction of training done (for schedules).
        state:    float tensor [B], this batch's slice of a per-sample memory kept
                  for each seed, NaN until written; update it in place under
                  ``torch.no_grad()``, e.g. ``state.copy_(value)``, and the harness
                  stores it back. (A loss is never told which samples it gets: no
                  sample index.)

    Write it like ``torch.nn.functional`` code: tensor operations only. Avoid
    ``.item()``, Python branches on tensor values and random ops: they stop the
    harness from training many seeds at once (it falls back to a slower loop).
    """
    return F.cross_entropy(logits / temperature, targets, reduction="none")
'''


def render(name: str, suite: str | None = None) -> str:
    """The template with ``name`` filled in; ``name`` must be one line without quotes.
    ``suite`` (default: the first registered suite taking ``classification_loss``) is the
    one its example command runs."""
    if not name.strip() or any(c in name for c in '\n\r"\\'):
        raise ValueError(f"objective name {name!r} must be one line without quotes")
    if suite is None:
        from harness.contract import registry
        suite = next(s.name for s in registry.all_suites()
                     if "classification_loss" in s.accepted_hooks)
    return TEMPLATE.replace(PLACEHOLDER, name).replace("{suite}", suite)
