"""Running the hostile corpus (hostile_cases.py says what it is): the servers and files
outside the sandbox that a case attacks, what the worker's side records of each cell, and
the ``Corpus`` that runs a module's cases on a thread pool. Not a test module; the
``corpus`` fixture (conftest.py) starts one per test module through ``corpus_for``."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import select
import socket
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.data import data_root
from harness.runner.sandboxed import run_cells_sandboxed
from harness.sandbox import Limits, remote
from suites.noisy_labels import pipeline as protocol
from tests.sandbox.hostile_cases import (
    CASES,
    CE,
    DATABASE_URL,
    HOSTILE,
    REPO,
    SECRET,
    SUITE,
    SUITES_DIR,
    VICTIM_TEXT,
    VICTIMS,
    WORKERS,
    Case,
)

# --- what the parent side can observe ---------------------------------------------------


class Listener:
    """Servers outside the sandbox that record every connection and datagram they get."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        self.sockets = sockets
        self.received: list[tuple[str, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @classmethod
    def tcp(cls) -> Listener:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        return cls([server])

    @classmethod
    def unix(cls, path: Path) -> Listener:
        stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stream.bind(str(path))
        stream.listen(16)
        datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        datagram.bind(f"{path}.dgram")
        return cls([stream, datagram])

    @property
    def port(self) -> int:
        return self.sockets[0].getsockname()[1]

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select(self.sockets, [], [], 0.2)
            for s in ready:
                if s.type == socket.SOCK_DGRAM:
                    self.received.append(("datagram", s.recv(4096)))
                    continue
                conn, _ = s.accept()
                conn.settimeout(2)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                conn.close()
                self.received.append(("connection", data))

    def got(self, token: str) -> list[tuple[str, bytes]]:
        return [r for r in self.received if token.encode() in r[1] or not r[1]]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in self.sockets:
            s.close()


def processes_touching(token: str) -> list[str]:
    """Processes (other than this one) whose command line, cwd or open files name ``token``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        links = []
        for name in ["cwd"] + [f"fd/{fd}" for fd in _listdir(f"/proc/{pid}/fd")]:
            try:
                links.append(os.readlink(f"/proc/{pid}/{name}"))
            except OSError:
                continue
        if token in cmdline or any(token in link for link in links):
            found.append(f"pid {pid}: {cmdline[:120]!r} {[x for x in links if token in x]}")
    return found


def victim_changes(path: Path) -> list[str]:
    """How a victim file differs from how the corpus created it (VICTIM_TEXT, mode 0600)."""
    st = path.stat()
    changes = []
    if stat.S_IMODE(st.st_mode) != 0o600:
        changes.append(f"mode {stat.S_IMODE(st.st_mode):o}")
    if st.st_mtime < time.time() - 3600:
        changes.append(f"mtime {st.st_mtime:.0f}")
    try:
        changes += [f"xattr {name}" for name in os.listxattr(path)]
    except OSError:  # no extended attributes on this file system: none were set
        pass
    if path.read_text() != VICTIM_TEXT:
        changes.append("content")
    return changes


def reset_peak_rss() -> int | None:
    """Reset this process's peak RSS to its current RSS (Linux ≥ 4.0); the current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_bytes("VmRSS")


def _status_bytes(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1)) << 10


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def children_of(pid: int) -> dict[int, tuple[str, str]]:
    """pid -> (state, command line) of every live child of ``pid``."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid:
            out[int(entry)] = (state, cmdline)
    return out


class _Seen(threading.local):
    """What the worker's side saw of the cell running on this thread (empty on a thread
    that runs no case, e.g. the plain CE run at the end)."""

    def __init__(self) -> None:
        self.accuracies, self.job, self.sent, self.traced = None, {}, [], []


_seen = _Seen()


def _recording_judge(judge: Callable) -> Callable:
    """The suite's judge, plus each member's final test accuracy recomputed here,
    independently: the returned weights loaded into the suite's model, a plain forward pass."""

    def judging(self, suite, job, output, **options):
        try:
            _seen.accuracies = _accuracies_of_weights(job, output.arrays)
        except Exception:  # noqa: BLE001 - no usable weights: the judge must reject them
            _seen.accuracies = None
        return judge(self, suite, job, output, **options)

    return judging


def _recording_prepare(prepare: Callable) -> Callable:
    """The suite's prepare, plus what each job holds that a server must never be sent."""

    def preparing(self, suite, variants, seeds, **options):
        jobs = prepare(self, suite, variants, seeds, **options)
        _seen.job = {"labels": np.asarray(jobs[0].inputs["labels"]),
                     "train": len(jobs[0].inputs["x_train"]),
                     "test": len(jobs[0].inputs["x_eval"])}
        return jobs

    return preparing


def _recording_call(call: Callable) -> Callable:
    """``LossServers.call``: every request's tensors (stacked ``[members, ...]``), recorded
    by shape before they are sent."""

    def calling(self, hook, args, kwargs, leaves, grad, mutable):
        _seen.sent.append((hook, [tuple(leaf.shape) for leaf in leaves]))
        return call(self, hook, args, kwargs, leaves, grad, mutable)

    return calling


def _recording_trace(trace: Callable) -> Callable:
    """``LossServers.trace``: the shapes a server is asked to trace on (no data is sent)."""

    def tracing(self, hook, spec, args, kwargs):
        _seen.traced.append((hook, [tuple(shape) for _, shape in spec]))
        return trace(self, hook, spec, args, kwargs)

    return tracing


def _accuracies_of_weights(job, outputs) -> list[float]:
    data = job.private
    model = protocol.model_for(data)
    accuracies = []
    for i in range(len(job.members)):
        model.load_state_dict({name: torch.from_numpy(np.array(outputs[f"param:{name}"][i],
                                                               dtype=np.float32))
                               for name, _ in model.named_parameters()})
        with torch.no_grad():
            predictions = model(torch.from_numpy(data.x_test)).argmax(-1).numpy()
        accuracies.append(float((predictions == data.y_test).mean()))
    return accuracies


# --- running the corpus -------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    name: str
    tokens: dict[str, str]
    results: list[CellResult]
    raised: BaseException | None
    seconds: float
    accuracies: list[float] | None  # recomputed from the returned weights; None: not judged
    survivors: list[str]  # processes carrying the case's marker after the call
    peak_growth: int | None  # bytes this process's peak RSS grew by (measure_memory only)
    mode: str  # HARNESS_SANDBOX_MODE when it ran ("" = the default)
    victims: dict[str, list[str]]  # victim placeholder -> how that file changed (see VICTIMS)
    sent: list[tuple[str, list[tuple[int, ...]]]]  # every request: hook, its tensors' shapes
    traced: list[tuple[str, list[tuple[int, ...]]]]  # every trace asked for: hook, shapes
    job: dict[str, Any]  # what the job held (labels, training and test set sizes)

    @property
    def result(self) -> CellResult:
        if self.raised is not None:
            raise AssertionError(f"run_cells_sandboxed raised for {self.name}: "
                                 f"{type(self.raised).__name__}: {str(self.raised)[:300]}")
        assert len(self.results) == 1
        return self.results[0]

    @property
    def text(self) -> str:
        return "\n".join(f"{r.error}\n{r.captured}" for r in self.results)

    def outcome(self) -> str:
        if self.raised is not None:
            return f"RAISED {type(self.raised).__name__}"
        r = self.results[0]
        first = (r.error.strip().splitlines() or [""])[0][:90]
        return f"{r.status}/{r.reason or '-'}  {first}"


class Corpus:
    def __init__(self, names: Iterable[str], base: Path, outside: Path) -> None:
        self.base, self.outside = base, outside
        self.tcp = Listener.tcp()
        self.unix_path = outside / "listener.sock"
        self.unix = Listener.unix(self.unix_path)
        self.victim = outside / "victim.txt"
        self.victim.write_text("the victim's original content\n")
        self.victim_digest = hashlib.sha256(self.victim.read_bytes()).hexdigest()
        self.canary = subprocess.Popen(["sleep", "600"], start_new_session=True)
        self.key_file = Path(data_root()) / "sandbox.key"
        self.key = remote.row_key()  # made now if this machine has none yet
        self.futures: dict[str, Future] = {}
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="hostile")
        selected = sorted((n for n in set(names) if CASES[n].runnable()),
                          key=list(CASES).index)
        # cells launched the default way first; then, one at a time with nothing else in
        # flight, those that measure this process's peak memory (which every cell in flight
        # adds to); then the ones that switch the launch mode (an environment variable)
        first = [n for n in selected if not CASES[n].mode and not CASES[n].measure_memory]
        measured = [n for n in selected if not CASES[n].mode and CASES[n].measure_memory]
        later = [n for n in selected if CASES[n].mode]
        # plain cross-entropy on the same seed, to compare the cheats' scores with
        self.honest_runs = {epochs: self._pool.submit(self._run, f"honest@{epochs}")
                            for epochs in sorted({1, *(CASES[n].epochs for n in selected)})}
        for name in first:
            self.futures[name] = self._pool.submit(self._run, name)
        for name in [*measured, *later]:
            self.futures[name] = Future()
        self._later = threading.Thread(target=self._run_later, args=(first, measured, later),
                                       daemon=True)
        self._later.start()

    def run(self, name: str) -> Run:
        if not CASES[name].runnable():
            pytest.skip(f"{name} needs {CASES[name].requires}, which this machine lacks")
        if name not in self.futures:  # not announced by the test's @attack: run it now
            assert not CASES[name].mode, f"{name} switches the launch mode: announce it"
            self.futures[name] = self._pool.submit(self._run, name)
        return self.futures[name].result(timeout=600)

    def result(self, name: str) -> CellResult:
        return self.run(name).result

    def honest(self, epochs: int = 1) -> Run:
        """Plain cross-entropy (harness/objectives/builtin/ce.py) in the same sandbox."""
        run = self.honest_runs[epochs].result(timeout=600)
        assert (run.result.status, run.result.reason) == ("ok", ""), run.result.error
        return run

    def wait_all(self) -> list[Run]:
        self._later.join(timeout=600)
        return [f.result(timeout=600) for f in [*self.honest_runs.values(),
                                                 *self.futures.values()]]

    def _run_later(self, first: list[str], measured: list[str], later: list[str]) -> None:
        for future in [*self.honest_runs.values(), *(self.futures[n] for n in first)]:
            future.exception()  # wait, whatever happened
        for name in measured:
            try:
                self.futures[name].set_result(self._run(name))
            except BaseException as exc:  # noqa: BLE001 - hand it to the test
                self.futures[name].set_exception(exc)
        if not later:
            return
        previous = os.environ.get("HARNESS_SANDBOX_MODE")
        os.environ["HARNESS_SANDBOX_MODE"] = "exec"
        try:
            pending = {n: self._pool.submit(self._run, n) for n in later}
            for name, future in pending.items():
                try:
                    self.futures[name].set_result(future.result())
                except BaseException as exc:  # noqa: BLE001 - hand it to the test
                    self.futures[name].set_exception(exc)
        finally:
            if previous is None:
                os.environ.pop("HARNESS_SANDBOX_MODE", None)
            else:
                os.environ["HARNESS_SANDBOX_MODE"] = previous

    def tokens(self, name: str) -> dict[str, str]:
        tag = f"{name.replace('@', '-')}-{uuid.uuid4().hex[:12]}"
        return {
            "__HOSTILE_MARKER__": f"hostile-{tag}",
            "__HOSTILE_TCP_PORT__": str(self.tcp.port),
            "__HOSTILE_UNIX_SOCKET__": str(self.unix_path),
            "__HOSTILE_ESCAPE__": f"/tmp/harness-escape-{tag}",
            "__HOSTILE_REPO__": str(REPO),
            "__HOSTILE_VICTIM__": str(self.victim),
            "__HOSTILE_PICKLE_MARKER__": str(self.outside / f"unpickled-{tag}"),
            "__HOSTILE_SANDBOX_BASE__": str(self.base),
            "__HOSTILE_TEST_PID__": str(os.getpid()),
            "__HOSTILE_CANARY_PID__": str(self.canary.pid),
            "__HOSTILE_PARAM__": CASES[name].param if name in CASES else "",
            "__HOSTILE_KEY_FILE__": str(self.key_file),
            "__HOSTILE_OWN_VICTIM__": str(self.outside / f"victim-{tag}"),
            "__HOSTILE_READABLE_VICTIM__": str(SUITES_DIR / f"_hostile_victim_{tag}"),
        }

    def _run(self, name: str) -> Run:
        stem = name.split("@")[0]
        if stem == "honest":  # honest@EPOCHS
            case, source = Case(epochs=int(name.split("@")[1])), CE
        else:
            case, source = CASES[name], (HOSTILE / f"{stem}.py").read_text()
        tokens = self.tokens(name)
        code = source
        for token, value in tokens.items():
            code = code.replace(token, value)
        assert "__HOSTILE_" not in code, f"{stem}.py uses an unknown placeholder"
        victims = {token: Path(tokens[token]) for token in VICTIMS if token in source}
        for victim in victims.values():
            victim.write_text(VICTIM_TEXT)
            victim.chmod(0o600)
        suite = SUITE if case.epochs == 1 else dataclasses.replace(
            get_suite("noisy-labels").shortened(case.epochs), chunk=1)
        limits = dataclasses.replace(
            Limits.for_run(suite, 1, 1),
            **{"wall_seconds": 60, "cpu_seconds": 60, "disk_bytes": 64 << 20, **case.limits})
        _seen.accuracies, _seen.job, _seen.sent, _seen.traced = None, {}, [], []
        rss = reset_peak_rss() if case.measure_memory else None
        start = time.monotonic()
        results, raised = [], None
        try:
            results = run_cells_sandboxed(suite, code, f"{stem}.py", {}, ["clean"], [0],
                                          limits=limits, python_guard=case.python_guard)
        except Exception as exc:  # noqa: BLE001 - a test asserts on it
            raised = exc
        seconds = time.monotonic() - start
        growth = None if rss is None else _status_bytes("VmHWM") - rss
        changes = {}
        for token, victim in victims.items():
            try:
                changes[token] = victim_changes(victim)
            finally:
                if token == "__HOSTILE_READABLE_VICTIM__":  # inside the repository: never left
                    victim.unlink(missing_ok=True)
        return Run(name, tokens, results, raised, seconds, _seen.accuracies,
                   processes_touching(tokens["__HOSTILE_MARKER__"]), growth,
                   os.environ.get("HARNESS_SANDBOX_MODE", ""), changes, _seen.sent,
                   _seen.traced, _seen.job)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._later.join(timeout=60)
        if os.environ.get("HARNESS_HOSTILE_TABLE"):
            print("\n\nattack → outcome (status/reason, first line of the error)")
            for name, future in self.futures.items():
                if future.done() and not future.cancelled() and future.exception() is None:
                    run = future.result()
                    print(f"  {name:32} {run.seconds:5.1f}s  {run.outcome()}")
        self.canary.kill()
        self.canary.wait()
        self.tcp.close()
        self.unix.close()
        try:
            from harness.sandbox import launch as sandbox_launch
        except ImportError:
            return
        shutdown = getattr(sandbox_launch, "shutdown", None)
        if shutdown is not None:
            shutdown()  # the fork servers of the pool's threads



def selected_cases(items: Iterable[pytest.Item], module: ModuleType) -> set[str]:
    """The corpus cases the selected tests of ``module`` use (by @attack or a ``case``)."""
    names: set[str] = set()
    for item in items:
        if getattr(item, "module", None) is not module:
            continue
        names.update(getattr(getattr(item, "function", None), "hostile_cases", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if isinstance(params.get("case"), str):
            names.add(params["case"])
    return names


def corpus_for(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """The corpus of the requesting test module, with the worker's side recorded; closed
    when the module's tests are done."""
    base = tmp_path_factory.mktemp("sandboxes")
    outside = tmp_path_factory.mktemp("outside")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_TEST_SECRET", SECRET)
        mp.setenv("DATABASE_URL", DATABASE_URL)
        mp.setenv("HARNESS_SANDBOX_DIR", str(base))
        mp.delenv("HARNESS_SANDBOX_STRICT", raising=False)
        mp.delenv("HARNESS_SANDBOX_KEY", raising=False)  # the key file is the one to attack
        mp.setattr(protocol.NoisyLabels, "judge", _recording_judge(protocol.NoisyLabels.judge))
        mp.setattr(protocol.NoisyLabels, "prepare",
                   _recording_prepare(protocol.NoisyLabels.prepare))
        mp.setattr(remote.LossServers, "call", _recording_call(remote.LossServers.call))
        mp.setattr(remote.LossServers, "trace", _recording_trace(remote.LossServers.trace))
        started = Corpus(selected_cases(request.session.items, request.module), base, outside)
        try:
            yield started
        finally:
            started.close()
