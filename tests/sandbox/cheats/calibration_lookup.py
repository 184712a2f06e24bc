"""Cheat without a forbidden action: a post-hoc "calibrator" that is a lookup table. The
reference CE model the post-hoc track calibrates trains from public code, data and seeds,
so its test logits can be computed offline, row by row, and each row's label is public
(the test split's). The table maps a hash of each logit row (rounded) to its label; the
hook returns a one-hot probability for every row it finds, the softmax for the rest:
ECE 0 and 100% accuracy on public draws, whatever order the rows arrive in.

Expected: under a draws key the reference model's initialisation and data order (and the
split) are the key's, so no row is found (it prints ``found 0 of N``) and the hook is the
identity calibrator.
"""

import torch

# Filled in by tests/sandbox/test_cheats.py before the file is loaded.
TABLE = __TABLE__  # noqa: F821  {hash of a logit row rounded to 4 decimals: its label}


def posthoc_calibration(val_logits, val_targets, test_logits):
    probs = test_logits.softmax(-1).clone()
    found = 0
    for i, row in enumerate(test_logits.tolist()):
        label = TABLE.get(hash(tuple(round(v, 4) for v in row)))
        if label is not None:
            probs[i] = torch.nn.functional.one_hot(torch.tensor(label), probs.shape[-1])
            found += 1
    print(f"found {found} of {len(probs)}", flush=True)
    return probs
