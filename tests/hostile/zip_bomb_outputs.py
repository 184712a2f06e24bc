"""A decompression bomb as outputs.npz: monkeypatches numpy.savez to write one deflated
member that declares 768 MiB of int64 zeros (about 1 MB on disk, far under the disk
quota), which the parent would inflate if it loaded the outputs.

Expected: rejected as ``invalid-output`` (members must be stored uncompressed) without the
worker allocating the declared size.
"""

import zipfile

import numpy as np
import torch.nn.functional as F

SIZE = 768 << 20


def _bomb(path, **outputs):
    header = {"descr": "<i8", "fortran_order": False, "shape": (SIZE // 8,)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("eval_predictions.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, header)
            chunk = bytes(1 << 24)
            for _ in range(SIZE >> 24):
                member.write(chunk)


np.savez = _bomb


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
