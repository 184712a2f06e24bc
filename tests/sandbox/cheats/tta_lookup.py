"""Cheat without a forbidden action: a test-time "adjustment" that is a lookup table. The
source model, the corrupted pool and the stream order all come from public code, data and
seeds, so the features the model computes for every row of the stream can be computed
offline, and each row's label is public (the pool is the digits' test split). The table maps
a hash of each feature row (rounded) to its label; the hook returns a one-hot probability for
every row it finds, the model's own for the rest: an online error near 0 on public draws.

Expected: under a draws key the source models, the corruption draws and the stream orders are
the key's, so no row is found (it prints ``found 0 of N``) and the hook is the identity: BN-1's
error (test-batch statistics, no step), an honest baseline's.
"""

import torch

# Filled in by tests/sandbox/test_cheats.py before the file is loaded.
TABLE = __TABLE__  # noqa: F821  {hash of a feature row rounded to 3 decimals: its label}


def tta_adjust(probs, features, *, progress: float):
    out, found = probs.clone(), 0
    for i, row in enumerate(features.tolist()):
        label = TABLE.get(hash(tuple(round(v, 3) for v in row)))
        if label is not None:
            out[i] = torch.nn.functional.one_hot(torch.tensor(label), probs.shape[-1])
            found += 1
    if progress == 0:  # the stream's first batch
        print(f"found {found} of {len(out)}", flush=True)
    return out
