"""A memory bomb that passes the zip checks: monkeypatches numpy.savez to write outputs.npz
with one stored (uncompressed) member of 64 bytes whose .npy header declares 2**40 int64
values (8 TiB): the archive's declared sizes are tiny, the array's are not.

Expected: rejected as ``invalid-output`` without the worker allocating the declared size.
"""

import zipfile

import numpy as np
import torch.nn.functional as F


def _bomb(path, **outputs):
    header = {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        with archive.open("eval_predictions.npy", "w") as member:
            np.lib.format.write_array_header_1_0(member, header)
            member.write(bytes(64))


np.savez = _bomb


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
