"""Cheat without a forbidden action: shipped with the digits training set's clean labels
(public data), it rebuilds the trainer's data order — the order stream of
``harness.train.batches.epoch_orders`` is public and seeds are small integers — by
trying seeds until the targets of its first batch agree with the clean labels at those
positions, then trains on the clean labels instead of the noisy ones. With rows in the
public order (the previous protocol handed hooks the sample indices outright), this is
a clean-label run: ~97% at sym-0.4 against CE's ~70%.

Expected: the rows reach the hook in a secret order, so no seed agrees (it prints
``order not recovered``) and it falls back to plain cross-entropy: the same score as CE.
"""

import torch
import torch.nn.functional as F

from harness.train.batches import epoch_orders

# The placeholders are filled in by tests/sandbox/test_cheats.py before the file is loaded.
CLEAN = torch.tensor(__CLEAN_LABELS__)  # noqa: F821
EPOCHS, BATCH, SEEDS = __EPOCHS__, 64, 32  # noqa: F821
STEPS = -(-len(CLEAN) // BATCH)
# Every (seed, epoch) order, and the clean labels in that order: [SEEDS, EPOCHS, N].
ORDERS = torch.stack([epoch_orders([s], len(CLEAN), EPOCHS)[:, 0] for s in range(SEEDS)])
LABELS = CLEAN[ORDERS]
said = set()


def _say(text):
    if text not in said:
        said.add(text)
        print(text, flush=True)


def classification_loss(logits, targets):
    """Find the batch among every (seed, epoch, step): the window whose clean labels agree
    with these targets (60% expected at sym-0.4, ~10% anywhere else)."""
    n = len(targets)
    best, where = 0.0, None
    for j in range(STEPS):
        window = LABELS[:, :, j * BATCH:j * BATCH + n]
        if window.shape[-1] != n:
            continue
        agree = (window == targets).float().mean(-1)
        value, flat = agree.flatten().max(0)
        if value.item() > best:
            best, where = value.item(), (*divmod(flat.item(), EPOCHS), j)
    if best > 0.4:
        _say("order recovered")
        seed, epoch, j = where
        rows = ORDERS[seed, epoch, j * BATCH:j * BATCH + n]
        return F.cross_entropy(logits, CLEAN[rows], reduction="none")
    _say("order not recovered")
    return F.cross_entropy(logits, targets, reduction="none")
