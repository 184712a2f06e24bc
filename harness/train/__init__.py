"""The general seed-batched trainer (see :mod:`harness.train.loop`).

- :mod:`~harness.train.config`: ``TrainConfig`` and ``Optimizer``, read from a suite's settings;
- :mod:`~harness.train.members`: stacked parameters from a fresh init per seed or checkpoints;
- :mod:`~harness.train.batches`: samplers (shuffled per-member batches, paired batches);
- :mod:`~harness.train.optim`: SGD, Adam and AdamW over stacked members, per-member clipping;
- :mod:`~harness.train.loop`: ``train_members``, vmap with a loop fallback, divergence.
"""

from harness.train.batches import Paired, Sampler, Shuffled, epoch_orders
from harness.train.config import Optimizer, PerMember, TrainConfig, per_member_of
from harness.train.loop import (
    MemberLoss,
    ObjectiveRuntimeError,
    TrainResult,
    classification_member_loss,
    each_member,
    reduce_loss,
    train_members,
    with_state,
)
from harness.train.members import logits, predict, stack, stacked_init

__all__ = ["MemberLoss", "ObjectiveRuntimeError", "Optimizer", "Paired", "PerMember", "Sampler",
           "Shuffled",
           "TrainConfig", "TrainResult", "classification_member_loss", "each_member",
           "epoch_orders", "logits", "per_member_of", "predict", "reduce_loss", "stack",
           "stacked_init", "train_members", "with_state"]
