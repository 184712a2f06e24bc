"""Suite fixtures: arrays the trusted side builds once and every objective reuses.

A suite declares its fixtures (:class:`harness.contract.suite.Fixture`: a name, a builder
``"module:function"`` and a JSON config), e.g. the source models a test-time-adaptation
suite adapts or the target and retain models an unlearning suite starts from. A built
fixture is a dict of numpy arrays, stored content-addressed under the fixture root
(``$HARNESS_FIXTURES``, else ``<data root>/fixtures``): its key hashes the suite's name and
base version, the fixture's name and config, the seed and the source code of the builder's
module and of the modules the fixture names in ``code``, so a change to any of them builds
a new entry instead of reusing a stale one. Each entry is ``KEY.npz`` beside ``KEY.json``
(its manifest, with the archive's SHA-256); an entry whose manifest, checksum or arrays do
not check out is rebuilt, never trusted. Building holds an exclusive lock on ``KEY.lock``,
so two workers sharing the root build an entry once; the archive is written to a temporary
file and renamed into place, so a reader never sees half of one.

Builders are trusted code and run in the worker, never in the sandbox; the sandbox's root
holds no fixture directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import inspect
import io
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data import data_root
from harness.runner.environment import using_threads

if TYPE_CHECKING:
    import numpy as np

    from harness.contract.suite import Fixture, Suite

ENV = "HARNESS_FIXTURES"
FORMAT = 1  # of the manifest; part of the key


class FixtureError(RuntimeError):
    """A builder that failed or returned something that is not a dict of numpy arrays."""


@dataclass
class Built:
    """One fixture entry: its arrays, its key and whether this call built it."""

    key: str
    arrays: dict[str, np.ndarray]
    built: bool
    seconds: float = 0.0


@dataclass
class Ledger:
    """What fixture lookups did in this process (the CLI reports it: a second run reuses)."""

    reused: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)  # entries that failed their checks
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [f"{len(self.reused)} reused", f"{len(self.built)} built"]
        if self.rebuilt:
            parts.append(f"{len(self.rebuilt)} rebuilt after a failed check")
        if self.built:
            parts.append(f"building took {self.seconds:.1f} s")
        return ", ".join(parts)

    def merge(self, other: Ledger) -> None:
        """Add what ``other`` (another process's lookups) did; seconds add up."""
        self.reused += other.reused
        self.built += other.built
        self.rebuilt += other.rebuilt
        self.seconds += other.seconds


LEDGER = Ledger()


def root() -> Path:
    """Where fixtures are stored: ``$HARNESS_FIXTURES``, else ``<data root>/fixtures``."""
    return Path(os.environ.get(ENV) or Path(data_root()) / "fixtures")


def code_hash(modules: tuple[str, ...]) -> str:
    """SHA-256 over the source files of ``modules`` (their code, not their bytecode)."""
    digest = hashlib.sha256()
    for name in modules:
        source = inspect.getsource(importlib.import_module(name))
        digest.update(name.encode() + b"\0" + source.encode() + b"\0")
    return digest.hexdigest()


def key(suite: Suite, fixture: Fixture, seed: int | None,
        config: Mapping[str, Any] | None = None) -> str:
    """The content address of one entry (``config`` adds a variant's part of the config)."""
    builder_module = fixture.builder.partition(":")[0]
    payload = {"format": FORMAT, "threads": 1, "suite": suite.name,
               "version": suite.base_version,
               "fixture": fixture.name, "builder": fixture.builder,
               "config": {**fixture.config, **(config or {})}, "seed": seed,
               "code": code_hash((builder_module, *fixture.code))}
    from harness.contract import draws

    if draws.keyed():  # built from keyed draws: another entry (public keys stay as they were)
        payload["draws"] = draws.fingerprint()
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def stored_key(suite: Suite, name: str, seed: int | None = None,
               config: Mapping[str, Any] | None = None, *,
               directory: Path | None = None) -> str | None:
    """The key of the entry :func:`load` would return when it is in the store and checks
    out, else None."""
    fixture = suite.fixture(name)
    k = key(suite, fixture, seed, config)
    return k if _read((directory or root()) / suite.name / fixture.name, k) is not None else None


def load(suite: Suite, name: str, seed: int | None = None,
         config: Mapping[str, Any] | None = None, *, directory: Path | None = None,
         ledger: Ledger = LEDGER, where: Mapping[str, Any] | None = None) -> Built:
    """The fixture ``name`` of ``suite`` for ``seed``: from the cache if its entry checks
    out, else built by its builder (``builder(config, seed) -> dict of arrays``) and stored.

    ``where`` (e.g. ``{"data_root": …, "download": True}``) tells the builder where to find
    or fetch its inputs; it reaches the builder's config but not the key: the same data read
    from another folder builds the same fixture."""
    fixture = suite.fixture(name)
    k = key(suite, fixture, seed, config)
    folder = (directory or root()) / suite.name / fixture.name
    folder.mkdir(parents=True, exist_ok=True)
    cached = _read(folder, k)
    if cached is not None:
        ledger.reused.append(k)
        return Built(k, cached, built=False)
    with _locked(folder / f"{k}.lock"):
        cached = _read(folder, k)  # another worker may have built it while we waited
        if cached is not None:
            ledger.reused.append(k)
            return Built(k, cached, built=False)
        if (folder / f"{k}.json").exists() or (folder / f"{k}.npz").exists():
            ledger.rebuilt.append(k)
        start = time.perf_counter()
        arrays = _build(fixture, {**fixture.config, **(config or {}), **(where or {})}, seed)
        _write(folder, k, arrays, {"suite": suite.name, "version": suite.base_version,
                                   "fixture": fixture.name, "seed": seed,
                                   "config": {**fixture.config, **(config or {})}})
        seconds = time.perf_counter() - start
    ledger.built.append(k)
    ledger.seconds += seconds
    return Built(k, arrays, built=True, seconds=seconds)


def _build(fixture: Fixture, config: dict[str, Any], seed: int | None) -> dict[str, np.ndarray]:
    import numpy as np

    module, _, function = fixture.builder.partition(":")
    builder: Callable[..., Any] = getattr(importlib.import_module(module), function)
    # One torch thread, whatever the process had: CPU kernels split their sums by thread
    # count, so a model trained with 2 threads differs from one trained with 1 (0.0014
    # after 3 epochs of the unlearning target) and a cache entry would depend on the
    # machine that built it first.
    with using_threads(1):
        arrays = builder(config, seed)
    if not isinstance(arrays, dict) or not arrays or not all(
            isinstance(k, str) and isinstance(v, np.ndarray) for k, v in arrays.items()):
        raise FixtureError(f"fixture {fixture.name!r}: {fixture.builder} must return a "
                           f"non-empty dict of numpy arrays")
    if any(v.dtype == object for v in arrays.values()):
        raise FixtureError(f"fixture {fixture.name!r}: object arrays cannot be stored")
    return arrays


def _read(folder: Path, k: str) -> dict[str, np.ndarray] | None:
    """The entry's arrays, or None when it is missing or fails any check."""
    import numpy as np

    try:
        manifest = json.loads((folder / f"{k}.json").read_text())
        blob = (folder / f"{k}.npz").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("key") != k or manifest.get(
            "sha256") != hashlib.sha256(blob).hexdigest():
        return None
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError):
        return None
    if sorted(arrays) != sorted(manifest.get("arrays", [])):
        return None
    return arrays


def _write(folder: Path, k: str, arrays: dict[str, np.ndarray],
           about: dict[str, Any]) -> None:
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    blob = buffer.getvalue()
    manifest = {"key": k, "sha256": hashlib.sha256(blob).hexdigest(), "arrays": sorted(arrays),
                "bytes": len(blob), "created": time.time(), **about}
    # The archive first, the manifest last: an entry is valid only once both are in place.
    write_atomically(folder / f"{k}.npz", blob)
    write_atomically(folder / f"{k}.json", json.dumps(manifest, sort_keys=True).encode())


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: written to a temporary file beside it,
    synced, then renamed over it (a reader never sees half a file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _locked:
    """An exclusive ``flock`` on ``path`` for the duration of the block."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
