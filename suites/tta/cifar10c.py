"""Opt-in loader for the real CIFAR-10-C (Hendrycks & Dietterich, ICLR 2019).

Nothing here is needed by the embedded default suites; module import stays cheap (numpy and the
standard library only; urllib/tarfile/hashlib are imported when downloading).

Released format (Zenodo record 2535967, archive ``CIFAR-10-C.tar``, which unpacks to
``CIFAR-10-C/``):

* ``<corruption>.npy``: uint8 [5·n, 32, 32, 3] (HWC, RGB), n = 10000 CIFAR-10 test images per
  severity, severity 1 first, then 2..5.
* ``labels.npy``: integer [5·n], the n test labels repeated once per severity.

Files are opened with ``np.load(mmap_mode="r")`` so a call reads only the severity block (and
corruptions) it returns; any n per severity is accepted, as long as every file agrees.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.data.real import DatasetMissing

__all__ = [
    "CIFAR10C_CORRUPTIONS",
    "CIFAR10C_DIR",
    "CIFAR10C_EXTRA",
    "CIFAR10C_MD5",
    "CIFAR10C_URL",
    "CIFAR10CFormatError",
    "DatasetMissing",
    "UnknownCorruption",
    "cifar10c_files",
    "load_cifar10c",
]

CIFAR10C_DIR = "CIFAR-10-C"
CIFAR10C_TAR = "CIFAR-10-C.tar"
CIFAR10C_URL = "https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1"
#: MD5 of ``CIFAR-10-C.tar`` as listed on the Zenodo record (2,918,471,680 bytes).
CIFAR10C_MD5 = "56bf5dcef84df0e2308c6dcbcbbd8499"
LABELS_FILE = "labels.npy"
#: The 15 benchmark corruptions, then the 4 extras released alongside them.
CIFAR10C_CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
    "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
    "elastic_transform", "pixelate", "jpeg_compression",
)
CIFAR10C_EXTRA: tuple[str, ...] = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
SEVERITIES = (1, 2, 3, 4, 5)
IMAGE_SHAPE = (32, 32, 3)
NUM_CLASSES = 10
_CHUNK = 1 << 20


class UnknownCorruption(ValueError):
    """A corruption name that CIFAR-10-C does not have."""


class CIFAR10CFormatError(ValueError):
    """A CIFAR-10-C file (or the downloaded archive) is not in the released format."""


def _check_corruptions(corruptions: Sequence[str]) -> tuple[str, ...]:
    if isinstance(corruptions, str | bytes):
        raise TypeError(f"corruptions must be a sequence of names, e.g. [{corruptions!r}], "
                        f"not a bare string")
    names = tuple(corruptions)
    if not names:
        raise ValueError("corruptions is empty; name at least one")
    valid = (*CIFAR10C_CORRUPTIONS, *CIFAR10C_EXTRA)
    unknown = [c for c in names if c not in valid]
    if unknown:
        raise UnknownCorruption(
            f"unknown CIFAR-10-C corruption(s) {', '.join(map(repr, unknown))}; "
            f"valid: {', '.join(valid)}"
        )
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise ValueError(f"corruption(s) listed more than once: {', '.join(twice)}")
    return names


def cifar10c_files(corruptions: Sequence[str]) -> tuple[str, ...]:
    """File names (inside ``CIFAR-10-C/``) needed for ``corruptions``: one ``<name>.npy`` each,
    then ``labels.npy``. Raises ``UnknownCorruption`` for a name CIFAR-10-C lacks."""
    return (*(f"{c}.npy" for c in _check_corruptions(corruptions)), LABELS_FILE)


def _missing(folder: Path, names: Sequence[str]) -> list[str]:
    return [n for n in names if not (folder / n).is_file()]


def _missing_error(folder: Path, missing: list[str], note: str = "") -> DatasetMissing:
    return DatasetMissing(
        f"CIFAR-10-C not found: expected files {', '.join(missing)} in directory {folder}. "
        f"{note}Pass download=True (the --download CLI flag) to fetch {CIFAR10C_TAR} "
        f"(~2.9 GB) from {CIFAR10C_URL}, or download it yourself and extract it into "
        f"{folder.parent}/ (it unpacks to {CIFAR10C_DIR}/)."
    )


def _open_npy(path: Path) -> np.ndarray:
    """Memory-map one .npy file; a truncated or corrupt file becomes a clear error."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise CIFAR10CFormatError(
            f"{path}: cannot read as a .npy array (truncated or corrupt? {exc}); delete it "
            f"and extract it again from {CIFAR10C_TAR}"
        ) from exc


def _read_labels(path: Path) -> tuple[np.ndarray, int]:
    """Validated labels.npy -> (labels int64 [5·n], n)."""
    labels = _open_npy(path)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise CIFAR10CFormatError(
            f"{path}: expected a 1-d integer array, got {labels.dtype} {labels.shape}")
    if len(labels) == 0 or len(labels) % len(SEVERITIES):
        raise CIFAR10CFormatError(
            f"{path}: expected 5·n labels (n per severity), got {len(labels)}")
    n = len(labels) // len(SEVERITIES)
    blocks = np.asarray(labels, dtype=np.int64).reshape(len(SEVERITIES), n)
    if (blocks != blocks[0]).any():
        bad = [s for s, b in zip(SEVERITIES, blocks, strict=True) if (b != blocks[0]).any()]
        raise CIFAR10CFormatError(
            f"{path}: the label blocks of severities {bad} differ from severity 1's "
            f"(the released file repeats the same {n} labels for every severity)")
    if blocks.min() < 0 or blocks.max() >= NUM_CLASSES:
        raise CIFAR10CFormatError(
            f"{path}: labels outside [0, {NUM_CLASSES - 1}] "
            f"(min {blocks.min()}, max {blocks.max()})")
    return blocks[0], n


def _open_images(path: Path, n: int) -> np.ndarray:
    images = _open_npy(path)
    want = (len(SEVERITIES) * n, *IMAGE_SHAPE)
    if images.dtype != np.uint8 or images.shape != want:
        raise CIFAR10CFormatError(
            f"{path}: expected uint8 {list(want)} (5 severities x {n} images, HWC, as "
            f"{LABELS_FILE} implies), got {images.dtype} {list(images.shape)}")
    return images


def load_cifar10c(
    root: str | Path,
    corruptions: Sequence[str],
    severity: int,
    *,
    download: bool = False,
    limit: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10-C images and labels for ``corruptions`` at one ``severity`` (1..5), read from
    ``<root>/CIFAR-10-C/`` (see module docstring).

    Returns (images float32 [C, n, 3, 32, 32] in [0, 1], channels first, in the order of
    ``corruptions``; labels int64 [n]), n = images per severity (10000 in the release) or the
    first ``limit`` of the block. Reads with ``np.load(mmap_mode="r")`` so only the needed
    block of the needed files is read. ``download=True`` fetches and extracts the archive
    (md5-checked) when a needed file is missing.
    """
    names = _check_corruptions(corruptions)
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer) \
            or severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {list(SEVERITIES)}, got {severity!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | np.integer)
                              or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    root = Path(root)
    folder = root / CIFAR10C_DIR
    files = cifar10c_files(names)
    missing = _missing(folder, files)
    if missing and download:
        _download_cifar10c(root)
        missing = _missing(folder, files)
        if missing:
            raise _missing_error(folder, missing, f"The downloaded {CIFAR10C_TAR} lacked them. ")
    if missing:
        raise _missing_error(folder, missing)

    labels, n = _read_labels(folder / LABELS_FILE)
    m = n if limit is None else int(limit)
    if m > n:
        raise ValueError(f"limit={m} exceeds the {n} images per severity in {folder}")
    start = (int(severity) - 1) * n
    out = np.empty((len(names), m, 3, 32, 32), dtype=np.float32)
    for i, name in enumerate(names):
        block = _open_images(folder / f"{name}.npy", n)[start:start + m]  # only this is read
        out[i] = block.transpose(0, 3, 1, 2)
    out /= np.float32(255.0)
    return out, labels[:m].copy()


# ---------------------------------------------------------------------------------- download
def _member_name(name: str) -> str:
    """Normalised member name; refuses absolute paths and ``..`` components."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (parts and len(parts[0]) == 2 and parts[0][1] == ":") \
            or ".." in parts:
        raise CIFAR10CFormatError(
            f"{CIFAR10C_TAR}: refusing archive member {name!r} (absolute path or '..')")
    return "/".join(p for p in parts if p not in ("", "."))


def _fetch(url: str, dest: Path) -> str:
    """Stream ``url`` into ``dest``; returns the md5 hex digest of what was written."""
    import hashlib
    import urllib.request

    digest = hashlib.md5()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, dest.open("wb") as fh:
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                fh.write(chunk)
    except OSError as exc:  # URLError, HTTPError, timeouts, disk errors
        raise DatasetMissing(
            f"downloading CIFAR-10-C from {url} failed ({exc}); download {CIFAR10C_TAR} "
            f"yourself and extract it into {dest.parent}/"
        ) from exc
    return digest.hexdigest()


def _extract_npy(archive: Path, root: Path) -> list[str]:
    """Extract only the ``CIFAR-10-C/*.npy`` regular-file members of ``archive`` into ``root``
    (each written to a temp name, then renamed). Every member name is checked first."""
    import shutil
    import tarfile

    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            wanted = []
            for member in members:
                name = _member_name(member.name)
                parts = name.split("/")
                if len(parts) != 2 or parts[0] != CIFAR10C_DIR or not parts[1].endswith(".npy"):
                    continue  # README, directories, anything else
                if not member.isfile():
                    raise CIFAR10CFormatError(
                        f"{CIFAR10C_TAR}: refusing member {member.name!r} (not a regular file)")
                wanted.append((member, parts[1]))
            folder = root / CIFAR10C_DIR
            folder.mkdir(parents=True, exist_ok=True)
            for member, base in wanted:
                src = tar.extractfile(member)
                assert src is not None  # regular file
                tmp = folder / f".{base}.part"
                try:
                    with src, tmp.open("wb") as fh:
                        shutil.copyfileobj(src, fh, _CHUNK)
                    os.replace(tmp, folder / base)
                finally:
                    tmp.unlink(missing_ok=True)
    except tarfile.TarError as exc:
        raise CIFAR10CFormatError(f"{archive}: not a readable tar archive ({exc})") from exc
    return [base for _, base in wanted]


def _download_cifar10c(root: Path) -> None:
    """Fetch ``CIFAR-10-C.tar`` into a temp file in ``root``, check its md5 against the Zenodo
    record's, extract the ``.npy`` files, and delete the archive."""
    import tempfile

    root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{CIFAR10C_TAR}.", suffix=".part", dir=root)
    os.close(fd)
    tmp = Path(name)
    try:
        md5 = _fetch(CIFAR10C_URL, tmp)
        if md5 != CIFAR10C_MD5:
            raise CIFAR10CFormatError(
                f"{CIFAR10C_TAR} from {CIFAR10C_URL}: md5 {md5} does not match the published "
                f"{CIFAR10C_MD5} (incomplete or altered download); nothing was extracted")
        _extract_npy(tmp, root)
    finally:
        tmp.unlink(missing_ok=True)
