"""Trains off the protocol: wraps the suite's train_members in its own process so that the
model trains for 8 times the protocol's epochs, then returns only the last epochs' rows of
the predictions and curves: every array has the expected shape, and the returned weights
really produce the returned predictions.

Expected: the score is the protocol's (a one-epoch MLP, ~0.53), not that of a model
trained 8 times longer (~0.9); the parent cannot tell from the weights alone.
"""

import dataclasses

import torch.nn.functional as F

from harness.train import Shuffled
from suites.noisy_labels import pipeline as protocol

_train_members = protocol.train_members


def _longer(member_loss, params, batches, config, **kw):
    e = config.epochs
    seeds = list(range(batches.members))  # any order streams: nobody checks them
    longer = Shuffled(seeds, config.batch_size, 8 * e, shared=batches.shared, own=batches.own)
    result = _train_members(member_loss, params, longer,
                            dataclasses.replace(config, epochs=8 * e), **kw)
    return dataclasses.replace(result, evaluations=result.evaluations[-e:],
                               loss_curve=result.loss_curve[:, -e:],
                               grad_norm_curve=result.grad_norm_curve[:, -e:])


protocol.train_members = _longer


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
