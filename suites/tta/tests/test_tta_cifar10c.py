"""CIFAR-10-C loader on tiny fixture files in the released format (np.save'd uint8
[5·n, 32, 32, 3] per corruption, labels.npy [5·n]); the download path is served a small tar
through a patched ``urllib.request.urlopen`` (no network)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from harness.data.real import DatasetMissing
from suites.tta import cifar10c as c10c
from suites.tta.cifar10c import (
    CIFAR10C_CORRUPTIONS,
    CIFAR10C_DIR,
    CIFAR10C_EXTRA,
    CIFAR10C_URL,
    CIFAR10CFormatError,
    UnknownCorruption,
    cifar10c_files,
    load_cifar10c,
)

REPO = Path(__file__).resolve().parents[3]
N = 4  # images per severity in the fixtures


# ---------------------------------------------------------------- fixtures (released format)
def _arrays(corruptions: tuple[str, ...], n: int = N) -> dict[str, np.ndarray]:
    """``<name>.npy`` -> uint8 [5n, 32, 32, 3] (every block different), ``labels.npy``."""
    rng = np.random.default_rng(0)
    out = {f"{c}.npy": rng.integers(0, 256, size=(5 * n, 32, 32, 3), dtype=np.uint8)
           for c in corruptions}
    for arr in out.values():
        arr[0, 0, 0, 0], arr[-1, -1, -1, -1] = 0, 255  # pin both ends of the scale
    out["labels.npy"] = np.tile((np.arange(n) * 7 + 3) % 10, 5).astype(np.int64)
    return out


def make_cifar10c(root: Path, corruptions: tuple[str, ...] = ("fog", "snow"),
                  n: int = N) -> dict[str, np.ndarray]:
    folder = root / CIFAR10C_DIR
    folder.mkdir(parents=True, exist_ok=True)
    arrays = _arrays(corruptions, n)
    for name, arr in arrays.items():
        np.save(folder / name, arr)
    return arrays


def _expected(arr: np.ndarray, severity: int, n: int = N, m: int | None = None) -> np.ndarray:
    block = arr[(severity - 1) * n:(severity - 1) * n + (n if m is None else m)]
    return block.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0)


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def _release_tar(arrays: dict[str, np.ndarray]) -> bytes:
    members = {f"{CIFAR10C_DIR}/{k}": _npy_bytes(v) for k, v in arrays.items()}
    return _tar({f"{CIFAR10C_DIR}/README.txt": b"CIFAR-C Dataset README\n", **members})


class _Server:
    """Stands in for ``urllib.request.urlopen``: serves ``payload``, records the calls and
    what was in ``root`` while the body was being read."""

    def __init__(self, payload: bytes, root: Path) -> None:
        self.payload, self.root, self.urls, self.seen = payload, root, [], []

    def __call__(self, url: str, *args: object, **kwargs: object) -> io.BytesIO:
        self.urls.append(url)
        server = self

        class _Body(io.BytesIO):
            def read(self, size: int | None = -1) -> bytes:
                server.seen.append(sorted(p.name for p in server.root.iterdir()))
                return super().read(size)

        return _Body(self.payload)


def _serve(monkeypatch: pytest.MonkeyPatch, payload: bytes, root: Path,
           md5: str | None = None) -> _Server:
    server = _Server(payload, root)
    monkeypatch.setattr(urllib.request, "urlopen", server)
    if md5 is not None:
        monkeypatch.setattr(c10c, "CIFAR10C_MD5", md5)
    return server


# ---------------------------------------------------------------- names and files
def test_corruption_names() -> None:
    assert len(CIFAR10C_CORRUPTIONS) == 15 and len(CIFAR10C_EXTRA) == 4
    assert CIFAR10C_CORRUPTIONS[0] == "gaussian_noise"
    assert CIFAR10C_CORRUPTIONS[-1] == "jpeg_compression"
    assert set(CIFAR10C_EXTRA) == {"speckle_noise", "gaussian_blur", "spatter", "saturate"}


def test_files_needed() -> None:
    assert cifar10c_files(["snow", "fog"]) == ("snow.npy", "fog.npy", "labels.npy")
    assert cifar10c_files(["saturate"]) == ("saturate.npy", "labels.npy")


def test_files_unknown_corruption() -> None:
    with pytest.raises(UnknownCorruption, match="'fogg'.*valid:.*gaussian_noise.*saturate"):
        cifar10c_files(["fog", "fogg"])


# ---------------------------------------------------------------- round trip
@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_roundtrip_selects_the_severity_block(tmp_path: Path, severity: int) -> None:
    arrays = make_cifar10c(tmp_path)
    x, y = load_cifar10c(tmp_path, ["snow", "fog"], severity)
    assert x.dtype == np.float32 and x.shape == (2, N, 3, 32, 32)
    assert y.dtype == np.int64 and y.shape == (N,)
    np.testing.assert_array_equal(x[0], _expected(arrays["snow.npy"], severity))
    np.testing.assert_array_equal(x[1], _expected(arrays["fog.npy"], severity))
    np.testing.assert_array_equal(y, arrays["labels.npy"][:N])
    assert x.min() >= 0.0 and x.max() <= 1.0


def test_roundtrip_scale_ends(tmp_path: Path) -> None:
    make_cifar10c(tmp_path)
    assert load_cifar10c(tmp_path, ["fog"], 1)[0][0, 0, 0, 0, 0] == 0.0
    assert load_cifar10c(tmp_path, ["fog"], 5)[0][0, -1, -1, -1, -1] == 1.0


def test_channel_order_from_hwc(tmp_path: Path) -> None:
    folder = tmp_path / CIFAR10C_DIR
    folder.mkdir()
    img = np.zeros((5 * N, 32, 32, 3), dtype=np.uint8)
    img[N + 1, 2, 5, 0], img[N + 1, 2, 5, 1], img[N + 1, 2, 5, 2] = 51, 102, 255  # severity 2
    np.save(folder / "contrast.npy", img)
    np.save(folder / "labels.npy", np.zeros(5 * N, dtype=np.int64))
    x, _ = load_cifar10c(tmp_path, ["contrast"], 2)
    np.testing.assert_allclose(x[0, 1, :, 2, 5], [0.2, 0.4, 1.0], rtol=1e-6)
    assert np.count_nonzero(x) == 3  # nothing else lit up (not [32, 3, 32] etc.)


def test_limit_takes_the_first_of_the_block(tmp_path: Path) -> None:
    arrays = make_cifar10c(tmp_path)
    x, y = load_cifar10c(tmp_path, ["fog"], 3, limit=2)
    assert x.shape == (1, 2, 3, 32, 32)
    np.testing.assert_array_equal(x[0], _expected(arrays["fog.npy"], 3, m=2))
    np.testing.assert_array_equal(y, arrays["labels.npy"][:2])
    assert load_cifar10c(tmp_path, ["fog"], 3, limit=N)[0].shape[1] == N


@pytest.mark.parametrize("limit", [0, -1, N + 1, 1.5, True])
def test_bad_limit(tmp_path: Path, limit: object) -> None:
    make_cifar10c(tmp_path)
    with pytest.raises(ValueError, match="limit"):
        load_cifar10c(tmp_path, ["fog"], 1, limit=limit)  # type: ignore[arg-type]


def test_returns_owned_writable_arrays(tmp_path: Path) -> None:
    make_cifar10c(tmp_path)
    x, y = load_cifar10c(tmp_path, ["fog"], 1)
    assert not isinstance(x, np.memmap) and not isinstance(y, np.memmap)
    assert x.flags.writeable and y.flags.writeable


# ---------------------------------------------------------------- reads only what it needs
def test_unrelated_corruption_files_absent(tmp_path: Path) -> None:
    arrays = make_cifar10c(tmp_path, ("zoom_blur",))
    x, _ = load_cifar10c(tmp_path, ["zoom_blur"], 4)
    np.testing.assert_array_equal(x[0], _expected(arrays["zoom_blur.npy"], 4))


def test_unrelated_corrupt_file_is_not_opened(tmp_path: Path) -> None:
    make_cifar10c(tmp_path, ("fog",))
    (tmp_path / CIFAR10C_DIR / "snow.npy").write_bytes(b"garbage")
    assert load_cifar10c(tmp_path, ["fog"], 1)[0].shape == (1, N, 3, 32, 32)


def test_reads_memory_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_cifar10c(tmp_path)
    real_load, calls = np.load, []

    def spy(path: object, *args: object, **kwargs: object) -> object:
        calls.append((Path(str(path)).name, kwargs.get("mmap_mode")))
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    load_cifar10c(tmp_path, ["snow"], 2, limit=1)
    assert sorted(calls) == [("labels.npy", "r"), ("snow.npy", "r")]


# ---------------------------------------------------------------- argument errors
def test_unknown_corruption_lists_valid(tmp_path: Path) -> None:
    make_cifar10c(tmp_path)
    with pytest.raises(UnknownCorruption, match="'gaussian'.*valid: gaussian_noise, shot_noise"):
        load_cifar10c(tmp_path, ["fog", "gaussian"], 1)


@pytest.mark.parametrize("severity", [0, 6, -1, 2.0, True, "3"])
def test_bad_severity(tmp_path: Path, severity: object) -> None:
    make_cifar10c(tmp_path)
    with pytest.raises(ValueError, match=r"severity must be one of \[1, 2, 3, 4, 5\]"):
        load_cifar10c(tmp_path, ["fog"], severity)  # type: ignore[arg-type]


def test_bare_string_empty_and_duplicate_corruptions(tmp_path: Path) -> None:
    make_cifar10c(tmp_path)
    with pytest.raises(TypeError, match=r"\['fog'\]"):
        load_cifar10c(tmp_path, "fog", 1)
    with pytest.raises(ValueError, match="empty"):
        load_cifar10c(tmp_path, [], 1)
    with pytest.raises(ValueError, match="more than once: fog"):
        load_cifar10c(tmp_path, ["fog", "snow", "fog"], 1)


# ---------------------------------------------------------------- missing files
def test_missing_lists_files_dir_url_and_how(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissing) as info:
        load_cifar10c(tmp_path, ["fog", "frost"], 5)
    msg = str(info.value)
    assert "fog.npy, frost.npy, labels.npy" in msg
    assert str(tmp_path / CIFAR10C_DIR) in msg
    assert CIFAR10C_URL in msg and "download=True" in msg and "--download" in msg


def test_missing_lists_only_the_missing(tmp_path: Path) -> None:
    make_cifar10c(tmp_path, ("fog",))
    with pytest.raises(DatasetMissing, match=r"expected files frost\.npy in") as info:
        load_cifar10c(tmp_path, ["fog", "frost"], 1)
    assert "labels.npy" not in str(info.value) and "fog.npy" not in str(info.value)


def test_no_network_without_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = _serve(monkeypatch, b"", tmp_path)
    with pytest.raises(DatasetMissing):
        load_cifar10c(tmp_path, ["fog"], 1)
    assert server.urls == []


# ---------------------------------------------------------------- format errors
def _bad_file(root: Path, name: str, arr: np.ndarray) -> None:
    make_cifar10c(root)
    np.save(root / CIFAR10C_DIR / name, arr)


@pytest.mark.parametrize("arr", [
    np.zeros((5 * N, 32, 32, 3), dtype=np.float32),  # not uint8
    np.zeros((5 * N, 3, 32, 32), dtype=np.uint8),  # CHW, not the released HWC
    np.zeros((5 * N + 5, 32, 32, 3), dtype=np.uint8),  # n differs from labels.npy's
    np.zeros((N, 32, 32, 3), dtype=np.uint8),  # one severity only
    np.zeros((5 * N, 32, 32), dtype=np.uint8),  # no channel axis
], ids=["float32", "chw", "other-n", "one-block", "gray"])
def test_image_file_not_released_format(tmp_path: Path, arr: np.ndarray) -> None:
    _bad_file(tmp_path, "snow.npy", arr)
    with pytest.raises(CIFAR10CFormatError, match=r"snow\.npy: expected uint8 \[20, 32, 32, 3\]"):
        load_cifar10c(tmp_path, ["fog", "snow"], 1)


@pytest.mark.parametrize(("arr", "match"), [
    (np.zeros(5 * N + 1, dtype=np.int64), "expected 5·n labels"),
    (np.zeros(0, dtype=np.int64), "expected 5·n labels"),
    (np.zeros((5, N), dtype=np.int64), "1-d integer"),
    (np.zeros(5 * N, dtype=np.float64), "1-d integer"),
    (np.concatenate([np.zeros(4 * N, np.int64), np.ones(N, np.int64)]), r"severities \[5\]"),
    (np.full(5 * N, 10, dtype=np.int64), r"outside \[0, 9\]"),
    (np.full(5 * N, -1, dtype=np.int64), r"outside \[0, 9\]"),
], ids=["not-5n", "empty", "2d", "float", "blocks-differ", "ten", "negative"])
def test_labels_not_released_format(tmp_path: Path, arr: np.ndarray, match: str) -> None:
    _bad_file(tmp_path, "labels.npy", arr)
    with pytest.raises(CIFAR10CFormatError, match=rf"labels\.npy: .*{match}"):
        load_cifar10c(tmp_path, ["fog"], 1)


def test_labels_other_int_dtype_accepted(tmp_path: Path) -> None:
    arrays = make_cifar10c(tmp_path)
    np.save(tmp_path / CIFAR10C_DIR / "labels.npy", arrays["labels.npy"].astype(np.uint8))
    _, y = load_cifar10c(tmp_path, ["fog"], 1)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, arrays["labels.npy"][:N])


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


@pytest.mark.parametrize("damage", [
    _truncate,
    lambda p: p.write_bytes(b""),
    lambda p: p.write_bytes(b"\x93NUMPY garbage header"),
    lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True),
], ids=["truncated", "empty", "bad-header", "pickled-objects"])
@pytest.mark.parametrize("name", ["fog.npy", "labels.npy"])
def test_corrupt_npy_names_the_file(tmp_path: Path, damage, name: str) -> None:
    make_cifar10c(tmp_path)
    damage(tmp_path / CIFAR10C_DIR / name)
    with pytest.raises(CIFAR10CFormatError, match=rf"{name}: cannot read as a \.npy"):
        load_cifar10c(tmp_path, ["fog"], 1)


# ---------------------------------------------------------------- download (patched urlopen)
def test_download_fetches_checks_and_extracts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = _arrays(("fog", "snow", "saturate"))
    payload = _release_tar(arrays)
    server = _serve(monkeypatch, payload, tmp_path, hashlib.md5(payload).hexdigest())
    x, y = load_cifar10c(tmp_path, ["snow"], 2, download=True)
    assert server.urls == [CIFAR10C_URL]
    np.testing.assert_array_equal(x[0], _expected(arrays["snow.npy"], 2))
    np.testing.assert_array_equal(y, arrays["labels.npy"][:N])
    # Streamed into a temp file inside root, removed afterwards; only the .npy files kept.
    assert any(any(n.endswith(".part") for n in seen) for seen in server.seen)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CIFAR10C_DIR]
    assert sorted(p.name for p in (tmp_path / CIFAR10C_DIR).iterdir()) == sorted(arrays)
    # Now on disk: later calls (other corruptions too) need no network.
    server.urls.clear()
    assert load_cifar10c(tmp_path, ["fog", "saturate"], 5, download=True)[0].shape[0] == 2
    assert server.urls == []


def test_download_accepts_dot_slash_member_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = _arrays(("fog",))
    payload = _tar({f"./{CIFAR10C_DIR}/{k}": _npy_bytes(v) for k, v in arrays.items()})
    _serve(monkeypatch, payload, tmp_path, hashlib.md5(payload).hexdigest())
    assert load_cifar10c(tmp_path, ["fog"], 1, download=True)[0].shape == (1, N, 3, 32, 32)


def test_download_md5_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _release_tar(_arrays(("fog",)))
    _serve(monkeypatch, payload, tmp_path)  # the published md5 stays: it cannot match
    with pytest.raises(CIFAR10CFormatError, match=rf"md5 {hashlib.md5(payload).hexdigest()} "
                                                  rf"does not match the published "
                                                  rf"56bf5dcef84df0e2308c6dcbcbbd8499"):
        load_cifar10c(tmp_path, ["fog"], 1, download=True)
    assert list(tmp_path.iterdir()) == []  # temp archive removed, nothing extracted


@pytest.mark.parametrize("evil", [
    "../evil.npy", f"{CIFAR10C_DIR}/../../evil.npy", "/tmp/cifar10c-evil.npy",
    f"{CIFAR10C_DIR}/../evil.npy",
])
def test_download_refuses_path_traversal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evil: str
) -> None:
    root = tmp_path / "root"
    members = {f"{CIFAR10C_DIR}/{k}": _npy_bytes(v) for k, v in _arrays(("fog",)).items()}
    payload = _tar({**members, evil: b"x"})
    _serve(monkeypatch, payload, root, hashlib.md5(payload).hexdigest())
    with pytest.raises(CIFAR10CFormatError, match=r"refusing archive member .*evil\.npy"):
        load_cifar10c(root, ["fog"], 1, download=True)
    assert not (tmp_path / "evil.npy").exists() and not Path("/tmp/cifar10c-evil.npy").exists()
    assert not (root / CIFAR10C_DIR).exists()  # checked before anything is written
    assert list(root.iterdir()) == []


def test_download_refuses_link_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _tar({f"{CIFAR10C_DIR}/labels.npy": _npy_bytes(np.zeros(5 * N, np.int64))},
                   links={f"{CIFAR10C_DIR}/fog.npy": "/etc/passwd"})
    _serve(monkeypatch, payload, tmp_path, hashlib.md5(payload).hexdigest())
    with pytest.raises(CIFAR10CFormatError, match="fog.npy.*not a regular file"):
        load_cifar10c(tmp_path, ["fog"], 1, download=True)
    assert not (tmp_path / CIFAR10C_DIR / "fog.npy").exists()


def test_download_archive_lacking_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = _release_tar(_arrays(("fog",)))
    _serve(monkeypatch, payload, tmp_path, hashlib.md5(payload).hexdigest())
    with pytest.raises(DatasetMissing, match=r"frost\.npy .*lacked them"):
        load_cifar10c(tmp_path, ["frost"], 1, download=True)


def test_download_not_a_tar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"<html>not found</html>"
    _serve(monkeypatch, payload, tmp_path, hashlib.md5(payload).hexdigest())
    with pytest.raises(CIFAR10CFormatError, match="not a readable tar archive"):
        load_cifar10c(tmp_path, ["fog"], 1, download=True)
    assert list(tmp_path.iterdir()) == []


def test_download_network_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(url: str, *args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(DatasetMissing, match=r"downloading CIFAR-10-C from .*no route to host"):
        load_cifar10c(tmp_path, ["fog"], 1, download=True)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- import cost
def test_import_is_cheap() -> None:
    # Load the module file by itself (not through the package __init__, owned elsewhere).
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ("import sys, importlib.util as u; "
            "s = u.spec_from_file_location('c10c', 'suites/tta/cifar10c.py'); "
            "s.loader.exec_module(u.module_from_spec(s)); "
            "print(*(m in sys.modules for m in ('torch', 'torchvision', 'tarfile')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False", "False"]


# --- the opt-in variant end to end, on fixture files in the released formats -------------


def test_the_cifar10c_variant_runs_end_to_end_on_fixture_files(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    """CIFAR-10's pickles and CIFAR-10-C's .npy files under one data root: the harness
    trains the BN-CNN source model as a fixture (once), streams the 15 corruptions at
    severity 5 in the continual scenario and judges every cell."""
    from harness.contract.registry import get_suite, pipeline
    from harness.objectives.loading import load_objective
    from harness.runner.jobs import prepare_fixtures
    from tests.engine.test_real_data import make_cifar10

    monkeypatch.setenv("HARNESS_FIXTURES", str(tmp_path / "fixtures"))
    monkeypatch.setenv("HARNESS_DATA", str(tmp_path / "elsewhere"))  # --data-root must win
    make_cifar10(tmp_path)
    make_cifar10c(tmp_path, CIFAR10C_CORRUPTIONS, n=8)
    suite = get_suite("tta")
    variant = suite.variant("cifar10c")
    # seed 0 trains in its canonical chunk of 5 (harness/contract/chunks.py): its 5 source models
    assert prepare_fixtures(suite, [variant], [0], data_root=str(tmp_path)).startswith(
        "0 reused, 5 built")
    assert prepare_fixtures(suite, [variant], [0], data_root=str(tmp_path)).startswith(
        "5 reused, 0 built")
    steps = pipeline(suite)
    job = steps.prepare(suite, [variant], [0], data_root=str(tmp_path))[0]
    assert job.inputs["pool"].shape == (15, 8, 3, 32, 32)
    assert job.plan["architecture"] == "bn-cnn" and job.plan["batch_size"] == 200
    for name in ("source", "tent", "lame"):
        out = steps.train(suite, load_objective(name), job.inputs, job.plan)
        (r,) = steps.judge(suite, job, out)
        assert r.status == "ok", (name, r.error)
        assert 0 <= r.metrics["online_error"] <= 1
        assert {f"error_{c}" for c in CIFAR10C_CORRUPTIONS} <= set(r.metrics)
        assert r.info["fixtures"]["pool"] == "CIFAR-10-C (released files)"


def test_the_cifar10c_variant_says_what_is_missing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    from harness.contract.registry import get_suite
    from harness.runner.jobs import prepare_fixtures

    monkeypatch.setenv("HARNESS_FIXTURES", str(tmp_path / "fixtures"))
    suite = get_suite("tta")
    with pytest.raises(FileNotFoundError, match="cifar-10|CIFAR-10"):
        prepare_fixtures(suite, [suite.variant("cifar10c")], [0], data_root=str(tmp_path))
