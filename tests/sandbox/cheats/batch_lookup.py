"""Cheat without a forbidden action, whatever the row order: find which samples the batch
holds, then use their clean labels. On public draws the data order (epoch_orders), the
noise draw and the split all come from public seeds, and the digits' clean labels are
public, so the file ships, for every (seed, epoch, step) it could be in, the histogram of
the batch's noisy targets and, per noisy label, the clean labels hiding behind it.

The issue's three routes to the batch, chosen by ROUTE:

- ``histogram``: a pure tensor function, no ``state``, no ``progress``: the histogram of
  the targets is the same in any row order and names the batch among the candidates;
- ``progress``: ``progress`` names the step (hence epoch and batch); the histogram then
  only picks the seed;
- ``state``: a count of its calls names the step; each row's ``state`` (which follows its
  sample across epochs, whatever the row order) records the steps its sample was in, and
  the samples of the batch whose steps agree are that row's candidates: one, after a few
  epochs, whose clean label is then the row's.

Once found, each noisy-label group's rows get its exact clean-label counts, assigned
greedily by the model's own probabilities (a projection of its softmax onto the counts),
and the loss is cross-entropy on those (the ``state`` route: on the rows' own clean labels
where a row is known). On public draws: far above CE.

Expected: under a draws key the order, the noise and the split are the key's, no
candidate matches (it prints ``batch not found``) and it is plain cross-entropy.
"""

import torch
import torch.nn.functional as F

from harness.train.batches import epoch_orders

# Filled in by tests/sandbox/test_cheats.py before the file is loaded.
ROUTE = __ROUTE__  # noqa: F821
CLEAN = torch.tensor(__CLEAN_LABELS__)  # noqa: F821  [N] the public split's clean labels
NOISY = torch.tensor(__NOISY_LABELS__)  # noqa: F821  [S, N] each public seed's noisy draw
EPOCHS, BATCH, K = __EPOCHS__, 64, 10  # noqa: F821
SEEDS, N = NOISY.shape
STEPS = -(-N // BATCH)
ORDERS = torch.stack([epoch_orders([s], N, EPOCHS)[:, 0] for s in range(SEEDS)])  # [S, E, N]
# Per candidate batch (seed, epoch, step): its noisy targets' histogram and, per noisy label,
# the counts of the clean labels behind it.
HIST = torch.zeros(SEEDS, EPOCHS, STEPS, K, dtype=torch.long)
COUNTS = torch.zeros(SEEDS, EPOCHS, STEPS, K, K, dtype=torch.long)
for s in range(SEEDS):
    for e in range(EPOCHS):
        for j in range(STEPS):
            rows = ORDERS[s, e, j * BATCH:(j + 1) * BATCH]
            noisy, clean = NOISY[s, rows], CLEAN[rows]
            HIST[s, e, j] = torch.bincount(noisy, minlength=K)
            COUNTS[s, e, j] = torch.bincount(noisy * K + clean, minlength=K * K).view(K, K)
# Per candidate sample: the steps it was in over the last DIGITS epochs, as one number.
DIGITS = 4  # STEPS ** DIGITS stays an exact float32 integer
POS = torch.empty(SEEDS, EPOCHS, N, dtype=torch.long)  # the step of each sample each epoch
for s in range(SEEDS):
    for e in range(EPOCHS):
        POS[s, e, ORDERS[s, e]] = torch.arange(N) // BATCH
WHERE = torch.zeros(SEEDS, EPOCHS, N, dtype=torch.long)
for e in range(EPOCHS):
    WHERE[:, e] = (WHERE[:, e - 1] * STEPS if e else 0) % STEPS ** DIGITS + POS[:, e]
said = set()
calls = [0]


def _say(text):
    if text not in said:
        said.add(text)
        print(text, flush=True)


def _find(targets, step=None):
    """(seed, epoch, step) of the candidate batch whose targets' histogram this one has,
    among every step, or at the training ``step`` given (an epoch's steps in a row)."""
    hist = torch.bincount(targets, minlength=K)
    match = (HIST == hist).all(-1)  # [S, E, STEPS]
    if step is not None:
        only = torch.zeros_like(match)
        if step < EPOCHS * STEPS:
            only[:, step // STEPS, step % STEPS] = True
        match &= only
    found = match.nonzero()
    return tuple(found[0].tolist()) if len(found) else None


def _assign(probs, targets, counts):
    """Clean labels for the rows: per noisy group, its exact clean counts, greedily to the
    rows the model is surest of."""
    labels = targets.clone()
    for t in targets.unique().tolist():
        rows = (targets == t).nonzero().flatten()
        left = counts[t].clone()
        p = probs[rows].clone()
        for _ in range(len(rows)):
            p[:, left == 0] = -1.0
            flat = p.flatten().argmax().item()
            r, c = divmod(flat, K)
            labels[rows[r]] = c
            left[c] -= 1
            p[r] = -2.0
    return labels


def _loss(logits, targets, step=None):
    where = _find(targets, step)
    if where is None:
        _say("batch not found")
        return F.cross_entropy(logits, targets, reduction="none")
    _say("batch found")
    labels = _assign(logits.detach().softmax(-1), targets, COUNTS[where])
    return F.cross_entropy(logits, labels, reduction="none")


def _by_state(logits, targets, state):
    """The state route: this member's call count is the step; each row's state, the steps
    its sample was in; a row whose record one sample of the batch shares is that sample."""
    count = calls[0]
    calls[0] += 1
    where = _find(targets, count)
    record = (torch.nan_to_num(state, nan=0.0).long() * STEPS) % STEPS ** DIGITS + count % STEPS
    with torch.no_grad():
        state.copy_(record.to(state.dtype))
    if where is None:
        _say("batch not found")
        return F.cross_entropy(logits, targets, reduction="none")
    seed, epoch, step = where
    samples = ORDERS[seed, epoch, step * BATCH:(step + 1) * BATCH]
    same = record[:, None] == WHERE[seed, epoch, samples][None, :]  # [rows, samples]
    known = same.sum(-1) == 1
    labels = torch.where(known, CLEAN[samples][same.float().argmax(-1)], targets)
    if bool(known.all()):
        _say("batch found")  # every row of this batch named
    return F.cross_entropy(logits, labels, reduction="none")


if ROUTE == "state":
    def classification_loss(logits, targets, *, state: torch.Tensor):
        return _by_state(logits, targets, state)
elif ROUTE == "progress":
    def classification_loss(logits, targets, *, progress: float):
        return _loss(logits, targets, round(progress * EPOCHS * STEPS))
else:  # the targets alone
    def classification_loss(logits, targets):
        return _loss(logits, targets)
