"""Hostile objectives against the sandbox: every attack in tests/hostile/ is contained.

Each file in tests/hostile/ is one attack, written as a plain objective module (its
docstring says what it attempts and what must happen). The corpus runs through the real
entry point, ``run_cells_sandboxed``, on the noisy-labels suite shortened to one epoch
(variant ``clean``, one seed), several cells at a time on a thread pool (the module fixture
starts only the cases the selected tests need). Containment is checked from the parent's
side, independently of what the child reports: marker files outside never appear, no
process carrying a case's marker survives the call, servers the test runs (TCP on
127.0.0.1, Unix sockets outside the sandbox) receive nothing, the test process's secrets
never show in a cell's output or error, and metrics are recomputed here from the judged
predictions (final test accuracy from the returned weights, with a plain forward pass).
Every cell must also end with a clear status, reason and error.

A refusal by the guard ends the child at once (``killed``/``violation``, the error naming
that first refusal): an objective cannot catch it and carry on. So each file takes one
attack path; a file with several takes the one named by its case (``name@param``, the
``__HOSTILE_PARAM__`` placeholder), or all of them with the guard off (the kernel layers
alone: Landlock EACCES, seccomp EPERM, the network namespace). ``assert_refused`` checks
that exactly that refusal ended the cell and nothing after it ran; the containment checks
above hold independently. Output the objective wants seen before a refusal is flushed:
``os._exit`` drops what stdout still buffers.

Known holes are pinned with ``xfail(strict=True)``: they fail today and will turn the
suite red (XPASS) once the sandbox is fixed, so the mark must then be removed.

Nothing here runs a real fork or thread bomb: those attacks are bounded (at most 512
short-lived threads, a handful of single processes), whether or not a layer holds.
``HARNESS_HOSTILE_TABLE=1 pytest -s tests/test_hostile.py`` prints attack → outcome.
"""

from __future__ import annotations

import ast
import dataclasses
import errno
import hashlib
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harness.registry import get_suite
from harness.sandbox import Limits, SandboxUnavailable, isolation_support, run_cells_sandboxed
from harness.sandbox_guard import MARKER
from harness.suite import REASONS, CellResult
from suites.noisy_labels import pipeline as protocol

REPO = Path(__file__).resolve().parents[1]
HOSTILE = Path(__file__).resolve().parent / "hostile"
SUITES_DIR = REPO / "suites"  # a read root of the sandbox
# Files a case may change the metadata of (created per case when its code names them):
# one outside every root, one inside a read root (removed again right after the case).
VICTIMS = ("__HOSTILE_OWN_VICTIM__", "__HOSTILE_READABLE_VICTIM__")
VICTIM_TEXT = "this case's victim\n"
SUITE = get_suite("noisy-labels").shortened(1)
SECRET = f"hostile-secret-{uuid.uuid4().hex}"
DATABASE_URL = f"postgres://harness:{SECRET}-db@db.internal:5432/harness"
SUPPORT = isolation_support()
NAMESPACES = bool(SUPPORT["namespaces"])
LANDLOCK = int(SUPPORT["landlock"])
WORKERS = 3  # cells in flight at once; the parent mostly waits on its children
METRICS = {"test_acc", "best_test_acc", "best_epoch", "noise_rate", "train_acc_clean"}
THREAD_LIMIT = 64  # Limits.processes of the thread floods (the pids cgroup's pids.max)

ISOLATION_KEYS = {"mode", "namespaces", "uid", "landlock", "seccomp", "python_guard",
                  "pids_cgroup"}


def _has_pids_cgroup() -> bool:
    """Whether the fork server can cap a job's processes and threads (cgroup v1 or v2)."""
    if Path("/sys/fs/cgroup/pids/cgroup.procs").exists():
        return True
    try:
        return "pids" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        return False


PIDS_CGROUP = _has_pids_cgroup()

needs_kernel = pytest.mark.skipif(
    not (NAMESPACES and LANDLOCK), reason=f"needs namespaces and Landlock (have {SUPPORT})")
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="needs a PID namespace")
needs_pids_cgroup = pytest.mark.skipif(not PIDS_CGROUP, reason="needs a pids cgroup")


@dataclasses.dataclass(frozen=True)
class Case:
    """How one hostile file is run: limit overrides, guard, launch mode."""

    limits: dict[str, Any] = dataclasses.field(default_factory=dict)
    python_guard: bool = True
    mode: str = ""  # "exec": HARNESS_SANDBOX_MODE=exec (a fresh interpreter per child)
    # never run where this is missing: the attack would not be contained (a grandchild
    # sleeping for minutes, a SIGKILL reaching this process)
    requires: str = ""  # "" | "namespaces" | "kernel" (namespaces and Landlock)
    measure_memory: bool = False  # record how much this process's peak RSS grows
    epochs: int = 1  # the noisy-labels suite shortened to this many epochs
    param: str = ""  # replaces __HOSTILE_PARAM__: which of the file's attack paths to take

    def runnable(self) -> bool:
        return {"": True, "namespaces": NAMESPACES,
                "kernel": NAMESPACES and bool(LANDLOCK)}[self.requires]


KERNEL = Case(python_guard=False, requires="kernel")


def variants(stem: str, params: Iterable[str], **fields: Any) -> dict[str, Case]:
    """One case per parameter of a hostile file (``__HOSTILE_PARAM__``): one attack path each,
    since the guard's first refusal ends the child."""
    return {f"{stem}@{p}": Case(param=p, **fields) for p in params}


# What the guard names when it refuses each path (``sandbox: <this> is not allowed``).
FORK = "forking a process (os.fork)"
FORK_WAYS = {"fork": FORK, "posix_spawn": "starting a process (os.posix_spawn)",
             "subprocess": "starting a process (subprocess.Popen)", "multiprocessing": FORK,
             "pty": "forking a process (os.forkpty)"}
GRANDCHILD_WAYS = {k: FORK_WAYS[k] for k in ("fork", "posix_spawn", "subprocess",
                                             "multiprocessing")}
SOCKET = "opening a network socket (socket.__new__)"
SWALLOWED = {"shadow": "reading /etc/shadow", "socket": SOCKET, "fork": FORK,
             "write": "writing {escape}", "ctypes": "loading native code (ctypes.dlopen)"}
TAMPERED = {"fork": FORK, "unix": SOCKET, "tcp": "name resolution (socket.getaddrinfo)"}
WRITES = {"tmp_file": "{escape}", "repo_module": "{repo}/{marker}.py",
          "directory": "{escape}.d", "copyfile": "{escape}.copy"}
SIGNALS = {"parent": "os.kill", "test_pid": "os.kill", "canary": "os.kill",
           "killpg": "os.killpg", "everyone": "os.kill"}
NATIVE = {"libc_system": "loading native code (ctypes.dlopen)",
          "main_program": "loading native code (ctypes.dlopen)",
          "pythonapi": "calling native code (ctypes.dlsym)",
          "landlock_libc": "loading native code (ctypes.dlopen)"}
RENAMES = {"rename": "", "link": ".link", "symlink": ".symlink"}  # destination suffixes
IMPORTS = {"webapp.settings": "webapp", "tasks.celery": "tasks", "django.conf": "django"}
# guard_rebind: what each case rebinds; the first three are captured at install now
REBOUND = {"_real": "harness.sandbox_guard._real", "fsdecode": "os.fsdecode",
           "realpath": "posixpath.realpath", "any": "builtins.any",
           "isinstance": "builtins.isinstance", "fspath": "os.fspath",
           "joinrealpath": "posixpath._joinrealpath", "len": "builtins.len"}
REBIND_CLOSED = ("_real", "fsdecode", "realpath")

CASES: dict[str, Case] = {
    "read_etc_passwd": Case(),
    "parent_environ": Case(),
    "parent_environ@exec": Case(mode="exec"),
    "database_url": Case(),
    "database_url@kernel": KERNEL,
    **variants("import_webapp_settings", IMPORTS),
    "socket_connect_tcp": Case(),
    **variants("fork_bomb", FORK_WAYS),
    "memory_50gb": Case(),
    "memory_at_import": Case(),
    "spin_forever": Case(limits={"cpu_seconds": 5}),
    "fill_disk": Case(limits={"disk_bytes": 32 << 20}),
    **variants("write_outside", WRITES),
    **variants("rename_outside", RENAMES),
    "rename_outside@dir_fd": Case(param="dir_fd", requires="kernel"),
    "rename_outside@kernel": dataclasses.replace(KERNEL, param="all"),
    "sibling_workdirs": Case(),
    "special_files": Case(),
    "os_exit": Case(),
    "fake_setup_failure": Case(),
    "segfault_ctypes": Case(),
    "segfault_faulthandler": Case(),
    "print_1gb": Case(),
    "nan_loss": Case(),
    "wrong_shape_loss": Case(),
    "wrong_dtype_loss": Case(),
    "pickle_object_array": Case(),
    "pickle_raw_file": Case(),
    "zip_bomb_outputs": Case(measure_memory=True),
    "npy_header_bomb": Case(measure_memory=True),
    "fake_metrics": Case(),
    "swap_predictions": Case(),
    "fake_earlier_epochs": Case(epochs=2),
    "off_protocol_training": Case(),
    "tamper_report": Case(),
    "hide_violations": Case(),
    **variants("hide_violations_stderr", ["devnull", "broken_pipe"]),
    "violation_in_blocked_thread": Case(),
    "report_recursion_bomb": Case(),
    "report_bad_types": Case(),
    **variants("digits_labels", ["import", "read"]),
    "inherited_memory_labels": Case(),
    "inherited_memory_labels@kernel": KERNEL,
    "sleep_forever": Case(limits={"wall_seconds": 10}),
    **variants("grandchild_outlives", GRANDCHILD_WAYS),
    "grandchild_fork_exec": Case(requires="namespaces"),
    "grandchild_fork_exec@exec": Case(mode="exec", requires="namespaces"),
    "thread_flood": Case(limits={"processes": THREAD_LIMIT}),
    "thread_flood@exec": Case(limits={"processes": THREAD_LIMIT}, mode="exec"),
    **variants("ctypes_libc", NATIVE),
    "native_extension": Case(),
    "native_extension@exec": Case(mode="exec"),
    **variants("kill_parent", SIGNALS, requires="namespaces"),
    "kill_parent@test_pid@exec": Case(param="test_pid", mode="exec", requires="namespaces"),
    "symlink_outputs": Case(),
    **variants("metadata_outside", ["setxattr", "chmod"]),
    "metadata_outside@chmod_past_the_guard": Case(param="chmod_past_the_guard",
                                                  requires="kernel"),
    "metadata_outside@fd_in_read_root": Case(param="fd_in_read_root", requires="kernel"),
    "system_exit": Case(),
    "keyboard_interrupt": Case(),
    "infinite_recursion": Case(),
    **variants("swallow_and_retry", SWALLOWED),
    **variants("guard_tamper", TAMPERED, requires="kernel"),
    **variants("guard_rebind", REBOUND, requires="kernel"),
    "guard_path_toctou": Case(requires="kernel"),
    **variants("guard_exit_status", ["status", "after_report"], requires="kernel"),
    "kernel_read_passwd": KERNEL,
    "kernel_tcp_connect": KERNEL,
    "kernel_write_outside": KERNEL,
    "kernel_grandchild_fork": KERNEL,
    "kernel_grandchild_fork@exec": dataclasses.replace(KERNEL, mode="exec"),
    "kernel_unix_socket": KERNEL,
    "kernel_symlink_outputs": KERNEL,
    "kernel_signals": KERNEL,
    "kernel_native_threads": dataclasses.replace(KERNEL, limits={"processes": THREAD_LIMIT}),
}


def attack(*names: str) -> Callable[[Callable], Callable]:
    """Marks a test as using these corpus cases (so the fixture starts them early)."""
    unknown = [n for n in names if n not in CASES]
    assert not unknown, f"no such hostile case: {unknown}"

    def mark(fn: Callable) -> Callable:
        fn.hostile_cases = names  # type: ignore[attr-defined]
        return fn

    return mark


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


_judged = threading.local()


def _recording_judge(judge: Callable) -> Callable:
    """The suite's judge, plus each member's final test accuracy recomputed here,
    independently: the returned weights loaded into the suite's model, a plain forward pass."""

    def judging(self, suite, job, output, **options):
        try:
            _judged.accuracies = _accuracies_of_weights(job, output.arrays)
        except Exception:  # noqa: BLE001 - no usable weights: the judge must reject them
            _judged.accuracies = None
        return judge(self, suite, job, output, **options)

    return judging


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
        self.futures: dict[str, Future] = {}
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="hostile")
        selected = sorted((n for n in set(names) if CASES[n].runnable()),
                          key=list(CASES).index)
        # cells launched the default way first; then the ones that switch the launch mode
        # (an environment variable, so only when nothing else is in flight)
        first = [n for n in selected if not CASES[n].mode]
        later = [n for n in selected if CASES[n].mode]
        for name in first:
            self.futures[name] = self._pool.submit(self._run, name)
        for name in later:
            self.futures[name] = Future()
        self._later = threading.Thread(target=self._run_later, args=(first, later), daemon=True)
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

    def wait_all(self) -> list[Run]:
        self._later.join(timeout=600)
        return [f.result(timeout=600) for f in self.futures.values()]

    def _run_later(self, first: list[str], later: list[str]) -> None:
        for name in first:
            self.futures[name].exception()  # wait, whatever happened
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
            "__HOSTILE_PARAM__": CASES[name].param,
            "__HOSTILE_OWN_VICTIM__": str(self.outside / f"victim-{tag}"),
            "__HOSTILE_READABLE_VICTIM__": str(SUITES_DIR / f"_hostile_victim_{tag}"),
        }

    def _run(self, name: str) -> Run:
        case = CASES[name]
        stem = name.split("@")[0]
        tokens = self.tokens(name)
        code = source = (HOSTILE / f"{stem}.py").read_text()
        for token, value in tokens.items():
            code = code.replace(token, value)
        assert "__HOSTILE_" not in code, f"{stem}.py uses an unknown placeholder"
        victims = {token: Path(tokens[token]) for token in VICTIMS if token in source}
        for victim in victims.values():
            victim.write_text(VICTIM_TEXT)
            victim.chmod(0o600)
        suite = SUITE if case.epochs == 1 else get_suite("noisy-labels").shortened(case.epochs)
        limits = dataclasses.replace(
            Limits.for_run(suite, 1, 1),
            **{"wall_seconds": 60, "cpu_seconds": 60, "disk_bytes": 64 << 20, **case.limits})
        _judged.accuracies = None
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
        return Run(name, tokens, results, raised, seconds, _judged.accuracies,
                   processes_touching(tokens["__HOSTILE_MARKER__"]), growth,
                   os.environ.get("HARNESS_SANDBOX_MODE", ""), changes)

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
            from harness import sandbox_launch
        except ImportError:
            return
        shutdown = getattr(sandbox_launch, "shutdown", None)
        if shutdown is not None:
            shutdown()  # the fork servers of the pool's threads


def _selected_cases(items: Iterable[pytest.Item]) -> set[str]:
    names: set[str] = set()
    for item in items:
        if getattr(item, "module", None) is not sys.modules[__name__]:
            continue
        names.update(getattr(getattr(item, "function", None), "hostile_cases", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if isinstance(params.get("case"), str):
            names.add(params["case"])
    return names


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterable[Corpus]:
    base = tmp_path_factory.mktemp("sandboxes")
    outside = tmp_path_factory.mktemp("outside")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARNESS_TEST_SECRET", SECRET)
        mp.setenv("DATABASE_URL", DATABASE_URL)
        mp.setenv("HARNESS_SANDBOX_DIR", str(base))
        mp.delenv("HARNESS_SANDBOX_STRICT", raising=False)
        mp.setattr(protocol.NoisyLabels, "judge", _recording_judge(protocol.NoisyLabels.judge))
        started = Corpus(_selected_cases(request.session.items), base, outside)
        try:
            yield started
        finally:
            started.close()


def assert_clear(run: Run, status: str, reason: str, *needles: str) -> CellResult:
    """The cell ended with ``status``/``reason`` and an error naming every needle."""
    r = run.result
    assert (r.status, r.reason) == (status, reason), (
        f"{run.name}: expected {status}/{reason}, got {r.status}/{r.reason}\n"
        f"error: {r.error[:1500]}\noutput: {r.captured[:1500]}")
    assert reason in REASONS or (not reason and status in ("ok", "diverged"))
    for needle in needles:
        assert needle.lower() in r.error.lower(), f"{needle!r} not in the error: {r.error!r}"
    assert_no_secret(run)
    return r


def assert_no_secret(run: Run) -> None:
    for r in run.results:
        for where, text in (("captured output", r.captured), ("error", r.error)):
            assert SECRET not in text, f"{run.name}: the worker's secret leaked into {where}"
            assert "db.internal" not in text, f"{run.name}: DATABASE_URL leaked into {where}"


def assert_layers(run: Run, *, python_guard: bool = True) -> dict[str, Any]:
    """The isolation record is the parent's: every key, and the layers this case asked for."""
    record = run.result.info["sandbox"]
    assert set(record) == ISOLATION_KEYS, record
    assert record["mode"] == (CASES[run.name].mode or "fork"), record
    assert record["python_guard"] is python_guard, record
    assert record["namespaces"] is NAMESPACES and record["landlock"] == (LANDLOCK or None)
    assert record["seccomp"] is True, record
    if CASES[run.name].mode != "exec":
        assert record["pids_cgroup"] is PIDS_CGROUP, record
    return record


def started_count(output: str, pattern: str) -> int:
    found = re.search(pattern, output)
    assert found, f"{pattern!r} not in the output: {output[-500:]!r}"
    return int(found.group(1))


def assert_refused(run: Run, what: str, *, pattern: bool = False) -> CellResult:
    """The guard's first refusal ended the child: ``killed``/``violation``, the error is
    exactly that one refusal (``what``; a regular expression if ``pattern``), streamed once,
    and nothing the objective meant to do after it ran."""
    r = assert_clear(run, "killed", "violation")
    expected = what if pattern else re.escape(what)
    assert re.fullmatch(f"sandbox: {expected} is not allowed", r.error), (
        f"{run.name}: the error is not the one refusal {what!r}: {r.error!r}")
    assert r.captured.count(MARKER) == 1, r.captured[-1500:]
    assert "still running after" not in r.captured and "succeeded" not in r.captured, r.captured
    assert not r.metrics, r.metrics
    return r


def fill(template: str, run: Run) -> str:
    return template.format(escape=run.tokens["__HOSTILE_ESCAPE__"], repo=REPO,
                           marker=run.tokens["__HOSTILE_MARKER__"])


def cases_of(stem: str, *params: str) -> list[str]:
    """The corpus cases of ``stem`` (those with these parameters, if any are given)."""
    return [n for n in CASES if n.split("@")[0] == stem and not CASES[n].mode
            and (not params or CASES[n].param in params)]


# --- secrets and files outside ------------------------------------------------------------


@attack("read_etc_passwd")
def test_reading_etc_passwd_is_a_violation(corpus):
    run = corpus.run("read_etc_passwd")
    assert_refused(run, "reading /etc/passwd")
    assert "root:x:0:0" not in run.text


@pytest.mark.parametrize("case", ["parent_environ", "parent_environ@exec"])
def test_the_workers_environment_never_reaches_the_child(corpus, case):
    run = corpus.run(case)
    if CASES[case].mode:
        assert run.mode == CASES[case].mode  # the launch mode really was switched
    r = run.result
    assert_no_secret(run)
    assert "HARNESS_SANDBOXED" in r.captured  # it did read an environment: its own, scrubbed
    assert "DATABASE_URL" not in r.captured and "HARNESS_TEST_SECRET" not in r.captured
    if NAMESPACES:
        assert (r.status, r.reason) == ("ok", "")
        pids = re.search(r"pids visible: \[([\d, ]*)\]", r.captured)
        assert pids and len(pids.group(1).split(",")) <= 4, r.captured[:500]


@attack("database_url")
def test_the_database_url_is_out_of_reach(corpus):
    run = corpus.run("database_url")
    r = assert_refused(run, f"reading {REPO}/webapp/settings.py")
    assert "environment: {}" in r.captured  # the scrubbed environment has none (flushed first)
    assert "=>" not in r.captured  # the first file's refusal ended it: nothing was printed


@needs_kernel
@attack("database_url@kernel")
def test_kernel_alone_keeps_every_settings_file_out_of_reach(corpus):
    run = corpus.run("database_url@kernel")
    r = assert_clear(run, "failed", "objective", "PermissionError", "[Errno 13]",
                     "webapp/settings.py")
    assert "environment: {}" in r.captured and "=>" not in r.captured, r.captured
    for name in ("webapp/settings.py", "webapp/settings_test.py"):  # present in the repo
        assert f"{name}: PermissionError: [Errno 13]" in r.captured, r.captured
    assert_layers(run, python_guard=False)


@pytest.mark.parametrize("case", cases_of("import_webapp_settings"))
def test_importing_the_web_settings_is_a_violation(corpus, case):
    run = corpus.run(case)
    package = IMPORTS[CASES[case].param]
    # the import system's first look into the package: listing it, or reading its
    # __init__ (or cached bytecode) when the directory was already listed
    assert_refused(run, rf"(listing /\S*/{package}|reading /\S*/{package}/\S+)", pattern=True)
    assert "DATABASES" not in run.result.captured and "broker" not in run.result.captured


@pytest.mark.parametrize("case", cases_of("digits_labels"))
def test_the_suites_label_files_are_out_of_reach(corpus, case):
    run = corpus.run(case)
    target = r"\S+" if CASES[case].param == "import" else r"datasets/data/digits\.csv\.gz"
    assert_refused(run, rf"reading /\S*/site-packages/sklearn/{target}", pattern=True)
    assert "labels:" not in run.result.captured and "bytes of digits" not in run.result.captured


@attack("inherited_memory_labels")
def test_walking_the_inherited_heap_is_a_violation(corpus):
    run = corpus.run("inherited_memory_labels")
    r = assert_refused(run, "inspecting the harness (gc.get_objects)")
    assert "FOUND modules=[] cached=0" in r.captured, r.captured  # printed before the walk
    assert "heap walked" not in r.captured


@needs_kernel
@attack("inherited_memory_labels@kernel")
def test_no_labels_are_inherited_in_memory(corpus):
    run = corpus.run("inherited_memory_labels@kernel")
    r = assert_clear(run, "ok", "")
    assert "heap walked: label_like_arrays=0" in r.captured, r.captured
    assert "FOUND modules=[] cached=0" in r.captured
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])
    assert r.metrics["test_acc"] < 0.9
    assert_layers(run, python_guard=False)


@attack("sibling_workdirs")
def test_other_cells_work_directories_are_out_of_reach(corpus):
    run = corpus.run("sibling_workdirs")
    # both directories are ancestors of the work directory, which the guard lets the import
    # system list: Landlock's EACCES is what stops it
    assert_clear(run, "failed", "objective", "PermissionError", "[Errno 13]", str(corpus.base))
    assert "job.json" not in run.result.captured and "inputs.npz" not in run.result.captured


@pytest.mark.parametrize("case", cases_of("write_outside"))
def test_writing_outside_the_work_directory_is_a_violation(corpus, case):
    run = corpus.run(case)
    target = fill(WRITES[CASES[case].param], run)
    assert_refused(run, f"writing {target}")
    assert not Path(target).exists(), f"{target} was written from inside the sandbox"


@pytest.mark.parametrize("case", cases_of("rename_outside", *RENAMES))
def test_renames_and_links_to_outside_are_refused_and_reported(corpus, case):
    run = corpus.run(case)
    destination = run.tokens["__HOSTILE_ESCAPE__"] + RENAMES[CASES[case].param]
    assert_refused(run, f"writing {destination}")  # the destination is checked
    assert not os.path.lexists(destination)
    assert "failed:" not in run.result.captured  # not an error it could catch: the end


@needs_kernel
@attack("rename_outside@kernel")
def test_kernel_alone_refuses_renames_links_and_dir_fd_reads_outside(corpus):
    run = corpus.run("rename_outside@kernel")
    r = assert_clear(run, "ok", "")  # every error swallowed, then it trained
    escape = run.tokens["__HOSTILE_ESCAPE__"]
    for suffix in RENAMES.values():
        assert not os.path.lexists(escape + suffix)
    assert "succeeded" not in r.captured and r.captured.count(" failed: ") == 4, r.captured
    # Landlock: moving or linking a file out of the work directory is a cross-directory
    # reference it refuses with EXDEV; creating the symlink outside, EACCES
    for name, refusal in (("rename", "[Errno 18] Invalid cross-device link"),
                          ("link", "[Errno 18] Invalid cross-device link"),
                          ("symlink", "[Errno 13] Permission denied")):
        assert f"{name} failed: {refusal}: 'bait.txt' -> '{escape}" in r.captured, r.captured
    assert "dir_fd failed: [Errno 13] Permission denied: 'self/root/etc/passwd'" in r.captured
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("rename_outside@dir_fd")
def test_a_dir_fd_relative_read_outside_is_refused_by_landlock(corpus):
    r = corpus.result("rename_outside@dir_fd")
    assert "dir_fd failed: [Errno 13] Permission denied: 'self/root/etc/passwd'" in r.captured
    assert "root:x:0:0" not in r.captured and "succeeded" not in r.captured


@needs_kernel
@pytest.mark.xfail(strict=True, reason=(
    "reporting gap (Landlock refuses the read): the 'open' audit event carries no dir_fd, so "
    "the guard resolves os.open('self/root/etc/passwd', dir_fd=<fd of /proc>) against the "
    "work directory and lets it through; the refusal is never recorded as a violation and "
    "the cell, which swallowed the EACCES, is 'ok'"))
@attack("rename_outside@dir_fd")
def test_a_dir_fd_relative_read_outside_is_reported(corpus):
    assert_clear(corpus.run("rename_outside@dir_fd"), "killed", "violation", "etc/passwd")


@attack("symlink_outputs")
def test_symlinking_the_outputs_outside_is_a_violation(corpus):
    run = corpus.run("symlink_outputs")
    assert_refused(run, f"writing {corpus.victim}")  # the link's target is checked
    assert hashlib.sha256(corpus.victim.read_bytes()).hexdigest() == corpus.victim_digest


@pytest.mark.parametrize("case", [
    pytest.param("metadata_outside@setxattr"),
    "metadata_outside@chmod",
    pytest.param("metadata_outside@fd_in_read_root", marks=needs_kernel),
    pytest.param("metadata_outside@chmod_past_the_guard", marks=needs_kernel),
])
def test_metadata_outside_is_left_untouched(corpus, case):
    run = corpus.run(case)
    assert run.victims and all(c == [] for c in run.victims.values()), (
        run.victims, run.result.captured)
    assert "changed" not in run.result.captured
    if CASES[case].param == "chmod":  # checked by the guard
        assert_refused(run, f"writing {run.tokens['__HOSTILE_OWN_VICTIM__']}")


@pytest.mark.skipif(not LANDLOCK, reason="without Landlock a FIFO report would hang the parent")
@attack("special_files")
def test_fifos_and_device_nodes_are_refused(corpus):
    # A hang on the FIFO would end as timeout/wall: the status itself rules it out.
    run = corpus.run("special_files")
    assert_clear(run, "failed", "objective", "Permission denied")


# --- network --------------------------------------------------------------------------------


@attack("socket_connect_tcp")
def test_tcp_to_localhost_is_a_violation(corpus):
    run = corpus.run("socket_connect_tcp")
    assert_refused(run, SOCKET)
    assert corpus.tcp.got(run.tokens["__HOSTILE_MARKER__"]) == []


# --- processes and signals -------------------------------------------------------------------


@pytest.mark.parametrize("case", cases_of("fork_bomb"))
def test_a_fork_bomb_is_refused(corpus, case):
    run = corpus.run(case)
    assert_refused(run, FORK_WAYS[CASES[case].param])
    assert "failed:" not in run.result.captured  # no error to catch: the child just ended
    assert run.survivors == []


@pytest.mark.parametrize("case", cases_of("grandchild_outlives"))
def test_grandchildren_are_refused_and_none_survives(corpus, case):
    run = corpus.run(case)
    assert_refused(run, GRANDCHILD_WAYS[CASES[case].param])
    assert run.survivors == [], run.survivors


@needs_namespaces
@pytest.mark.parametrize("case", ["grandchild_fork_exec", "grandchild_fork_exec@exec"])
def test_a_grandchild_through_posixsubprocess_is_a_violation(corpus, case):
    # _posixsubprocess.fork_exec raises no audit event of its own: the guard replaces every
    # reference to it by a stub that does (seccomp would refuse the clone anyway).
    run = corpus.run(case)
    r = assert_clear(run, "killed", "violation", "forking a process")
    assert "grandchild started:" not in r.captured
    assert run.survivors == [], run.survivors


@needs_pids_cgroup
@attack("thread_flood")
def test_the_process_limit_stops_a_thread_flood(corpus):
    run = corpus.run("thread_flood")
    r = run.result
    started = started_count(r.captured, r"threads started: (\d+)")
    # the cgroup also counts the job's main thread, its init and the process above init
    assert THREAD_LIMIT - 16 <= started <= THREAD_LIMIT - 3, r.captured[-300:]
    assert_clear(run, "failed", "objective", "RuntimeError", "can't start new thread")
    assert assert_layers(run)["pids_cgroup"] is True


@attack("thread_flood@exec")
def test_exec_mode_has_no_process_cap_as_documented(corpus):
    """docs/sandbox.md: exec mode has no pids cgroup (so strict mode refuses it); the child
    stays root, which RLIMIT_NPROC does not bind: the bounded flood starts every thread."""
    run = corpus.run("thread_flood@exec")
    assert run.mode == "exec"
    record = assert_layers(run)
    assert record["pids_cgroup"] is False
    if record["uid"] == 0:  # RLIMIT_NPROC does not bind root: every thread starts
        assert "threads started: 512" in assert_clear(run, "ok", "").captured
    else:  # an unprivileged uid: RLIMIT_NPROC (Limits.processes) is the only cap
        r = assert_clear(run, "failed", "objective", "can't start new thread")
        assert started_count(r.captured, r"threads started: (\d+)") < THREAD_LIMIT


@needs_kernel
@needs_pids_cgroup
@attack("kernel_native_threads")
def test_native_threads_count_against_the_process_limit(corpus):
    run = corpus.run("kernel_native_threads")
    r = assert_clear(run, "ok", "")
    started = started_count(r.captured, r"native threads started: (\d+)")
    assert THREAD_LIMIT - 16 <= started <= THREAD_LIMIT - 3, r.captured[-300:]
    assert f"pthread_create returned {errno.EAGAIN}" in r.captured
    assert assert_layers(run, python_guard=False)["pids_cgroup"] is True


@needs_namespaces
@pytest.mark.parametrize("case", [*cases_of("kill_parent"), "kill_parent@test_pid@exec"])
def test_signalling_the_worker_is_a_violation_and_everyone_survives(corpus, case):
    run = corpus.run(case)
    assert_refused(run, f"signalling a process ({SIGNALS[CASES[case].param]})")
    assert run.mode == CASES[case].mode
    assert corpus.canary.poll() is None, "the canary process was killed from the sandbox"
    os.kill(os.getpid(), 0)  # still here


@pytest.mark.parametrize("case", cases_of("ctypes_libc"))
def test_native_calls_through_ctypes_are_a_violation(corpus, case):
    run = corpus.run(case)
    assert_refused(run, NATIVE[CASES[case].param])
    assert "native call returned" not in run.result.captured
    assert not Path("/tmp/harness-ctypes-escape").exists()


def _native_output(run: Run) -> str:
    output = run.result.captured
    if "no xxlimited extension" in output:
        pytest.skip("this Python has no xxlimited extension to copy")
    return output


@needs_namespaces
@attack("native_extension")
def test_no_objective_supplied_native_code_runs(corpus):
    run = corpus.run("native_extension")
    output = _native_output(run)
    assert "native call returned" not in output, output
    # the work directory is mounted noexec in the job's mount namespace
    assert "workdir: failed: ImportError" in output and "failed to map segment" in output
    # and seccomp refuses anonymous files (which are on no noexec mount)
    assert "memfd: failed: PermissionError: [Errno 1] Operation not permitted" in output
    assert_clear(run, "ok", "")  # kernel refusals the objective caught: it trained


@attack("native_extension@exec")
def test_exec_mode_has_no_noexec_work_directory_as_documented(corpus):
    """docs/sandbox.md: exec mode mounts no noexec work directory (so strict mode refuses
    it): the copied extension is imported from there and runs; memfd stays refused."""
    run = corpus.run("native_extension@exec")
    output = _native_output(run)
    assert run.mode == "exec"
    assert "workdir: native call returned 42" in output, output
    assert "memfd: failed: PermissionError: [Errno 1] Operation not permitted" in output


def test_strict_mode_refuses_exec_mode(corpus, monkeypatch):
    corpus.wait_all()  # the corpus's cells read the environment too: change it when idle
    monkeypatch.setenv("HARNESS_SANDBOX_STRICT", "1")
    monkeypatch.setenv("HARNESS_SANDBOX_MODE", "exec")
    before = set(corpus.base.iterdir())
    ce = (REPO / "harness" / "objectives" / "builtin" / "ce.py").read_text()
    with pytest.raises(SandboxUnavailable, match="exec mode"):
        run_cells_sandboxed(SUITE, ce, "ce.py", {}, ["clean"], [0])
    assert set(corpus.base.iterdir()) == before  # refused before anything was prepared


@pytest.mark.parametrize("case", cases_of("swallow_and_retry"))
def test_a_refusal_cannot_be_swallowed(corpus, case):
    run = corpus.run(case)
    r = assert_refused(run, fill(SWALLOWED[CASES[case].param], run))
    assert "still training after the attempt" not in r.captured  # not even one step more
    assert not Path(run.tokens["__HOSTILE_ESCAPE__"]).exists()


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_tamper"))
def test_clearing_the_guards_table_changes_nothing(corpus, case):
    run = corpus.run(case)
    assert_refused(run, TAMPERED[CASES[case].param])
    marker = run.tokens["__HOSTILE_MARKER__"]
    assert corpus.tcp.got(marker) == [] and corpus.unix.got(marker) == []
    assert run.survivors == [], run.survivors


def _rebind_line(run: Run) -> str:
    name = REBOUND[CASES[run.name].param]
    line = next((x for x in run.result.captured.splitlines() if x.startswith(f"{name}:")), "")
    return line


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_rebind", *REBIND_CLOSED))
def test_rebinding_the_guards_helpers_changes_nothing(corpus, case):
    run = corpus.run(case)
    assert_refused(run, "reading /etc/passwd")  # the helpers were captured at install
    assert _rebind_line(run) == ""  # the refusal ended it inside the read


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_rebind"))
def test_rebinding_what_the_guard_calls_leaves_landlock_refusing(corpus, case):
    run = corpus.run(case)
    assert_no_secret(run)
    assert "root:x:0:0" not in run.result.captured and ": read " not in run.result.captured
    if run.result.reason == "violation":
        return
    if CASES[case].param == "len":  # the hook raised instead of ending the child
        assert _rebind_line(run).endswith("/etc/passwd: TypeError: not a path"), \
            run.result.captured
    else:  # the guard let it through: the kernel refused
        assert _rebind_line(run).endswith(
            "/etc/passwd: PermissionError: [Errno 13] Permission denied: '/etc/passwd'"), \
            run.result.captured


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_rebind", "any", "isinstance", "fspath",
                                          "joinrealpath"))
def test_rebinding_what_the_guard_calls_is_reported(corpus, case):
    assert_clear(corpus.run(case), "killed", "violation")


@needs_kernel
@attack("guard_rebind@len")
def test_a_refusal_cannot_be_turned_into_an_exception(corpus):
    assert_clear(corpus.run("guard_rebind@len"), "killed", "violation")


@needs_kernel
@attack("guard_path_toctou")
def test_a_path_that_changes_its_answer_leaves_landlock_refusing(corpus):
    run = corpus.run("guard_path_toctou")
    r = run.result
    assert "root:x:0:0" not in r.captured and "read /etc/passwd" not in r.captured
    if r.reason != "violation":
        assert "FileIO: PermissionError: [Errno 13] Permission denied; __fspath__ called 2 " \
               "times" in r.captured, r.captured


@needs_kernel
@attack("guard_path_toctou")
def test_a_path_that_changes_its_answer_is_reported(corpus):
    assert_clear(corpus.run("guard_path_toctou"), "killed", "violation")


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_exit_status"))
def test_a_refusal_ends_the_child_whatever_status_it_chose(corpus, case):
    run = corpus.run(case)
    r = run.result
    assert "root:x:0:0" not in r.captured and "read /etc/passwd" not in r.captured
    assert "still running after the refusal" not in r.captured
    assert "sandbox: reading /etc/passwd is not allowed" in r.captured, r.captured  # refused


@needs_kernel
@pytest.mark.parametrize("case", cases_of("guard_exit_status"))
def test_a_refusal_is_reported_whatever_status_it_chose(corpus, case):
    assert_clear(corpus.run(case), "killed", "violation")


@attack("violation_in_blocked_thread")
def test_a_refusal_blocked_on_stderr_lets_nothing_through(corpus):
    r = corpus.result("violation_in_blocked_thread")
    assert "root:x:0:0" not in r.captured and "read /etc/passwd" not in r.captured


@attack("violation_in_blocked_thread")
def test_a_refusal_blocked_on_stderr_still_ends_the_child(corpus):
    assert_clear(corpus.run("violation_in_blocked_thread"), "killed", "violation")


# --- resource limits ----------------------------------------------------------------------------


@attack("memory_50gb")
def test_allocating_50_gb_is_killed_for_memory(corpus):
    assert_clear(corpus.run("memory_50gb"), "killed", "memory", "allocate")


@attack("memory_at_import")
def test_allocating_50_gb_at_import_is_killed_for_memory(corpus):
    assert_clear(corpus.run("memory_at_import"), "killed", "memory", "allocate",
                 "memory_at_import.py raised")


@attack("spin_forever")
def test_spinning_forever_is_killed_for_cpu(corpus):
    run = corpus.run("spin_forever")
    assert_clear(run, "killed", "cpu", "CPU time")


@attack("sleep_forever")
def test_sleeping_forever_times_out_on_the_wall_clock(corpus):
    run = corpus.run("sleep_forever")
    assert_clear(run, "timeout", "wall", "wall-clock limit of 10 s")


@attack("fill_disk")
def test_filling_the_disk_is_killed_for_disk(corpus):
    run = corpus.run("fill_disk")
    assert_clear(run, "killed", "disk", "32 MiB disk quota")


@attack("print_1gb")
def test_printing_1_gb_is_killed_for_output(corpus):
    run = corpus.run("print_1gb")
    r = assert_clear(run, "killed", "output", "output limit")
    assert len(r.captured) < (64 << 10) + 4096 + 200  # the kept head and tail only


# --- crashes and broken losses ------------------------------------------------------------------


@attack("os_exit")
def test_os_exit_is_a_crash(corpus):
    assert_clear(corpus.run("os_exit"), "failed", "crash", "exited with status 3")


@attack("fake_setup_failure")
def test_exiting_with_the_setup_failure_status_is_a_crash(corpus):
    # status 71 means "setup failed" only before the child's ready line; after it, the
    # objective's own exit is a crash, never SandboxUnavailable (retried as infrastructure)
    run = corpus.run("fake_setup_failure")
    assert run.raised is None, f"{type(run.raised).__name__}: {run.raised}"
    r = assert_clear(run, "failed", "crash", "exited with status 71 without a result")
    assert "[sandbox ready]" not in r.captured  # the parent's own line, stripped


@pytest.mark.parametrize("case", ["segfault_ctypes", "segfault_faulthandler"])
def test_a_segfault_is_a_crash(corpus, case):
    assert_clear(corpus.run(case), "failed", "crash", "died of SIGSEGV without a result")


@pytest.mark.parametrize(("case", "name"), [("system_exit", "SystemExit"),
                                            ("keyboard_interrupt", "KeyboardInterrupt"),
                                            ("infinite_recursion", "RecursionError")])
def test_base_exceptions_and_recursion_fail_the_objective(corpus, case, name):
    assert_clear(corpus.run(case), "failed", "objective", name)


@attack("nan_loss")
def test_a_nan_loss_diverges(corpus):
    r = corpus.result("nan_loss")
    assert (r.status, r.reason, r.diverged_step) == ("diverged", "", 0)
    assert "test_acc" not in r.metrics


@attack("wrong_shape_loss")
def test_a_wrong_shape_loss_fails_the_objective(corpus):
    batch = SUITE.settings["batch_size"]
    assert_clear(corpus.run("wrong_shape_loss"), "failed", "objective", "ValueError",
                 f"the loss must be a scalar or per-sample [B], got shape ({batch}, 10)")


@attack("wrong_dtype_loss")
def test_a_wrong_dtype_loss_fails_the_objective(corpus):
    assert_clear(corpus.run("wrong_dtype_loss"), "failed", "objective", "dtype", "Long")


# --- outputs, reports and metrics -----------------------------------------------------------------


@pytest.mark.parametrize(("case", "why"), [
    ("pickle_object_array", "an object array, i.e. a pickle"),
    ("pickle_raw_file", "not an .npz")])
def test_pickled_outputs_are_rejected_and_never_unpickled(corpus, case, why):
    run = corpus.run(case)
    assert_clear(run, "failed", "invalid-output", "outputs are not plain numpy arrays", why)
    assert not Path(run.tokens["__HOSTILE_PICKLE_MARKER__"]).exists()


@pytest.mark.parametrize(("case", "why"), [
    ("zip_bomb_outputs", "outputs must be stored uncompressed"),
    ("npy_header_bomb", "outputs are not plain numpy arrays")])
def test_a_decompression_bomb_is_rejected_without_inflating_it(corpus, case, why):
    run = corpus.run(case)
    assert_clear(run, "failed", "invalid-output", why)
    if run.peak_growth is None:
        pytest.skip("cannot reset the peak RSS (/proc/self/clear_refs) here")
    assert run.peak_growth < 256 << 20, f"the worker grew by {run.peak_growth >> 20} MiB"


@attack("fake_metrics")
def test_faked_metrics_inside_do_not_change_the_judged_ones(corpus):
    run = corpus.run("fake_metrics")
    r = assert_clear(run, "ok", "")
    assert set(r.metrics) == METRICS
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])
    assert r.metrics["test_acc"] < 0.9 and r.metrics["train_acc_clean"] < 0.9


@attack("tamper_report")
def test_a_forged_report_is_scored_as_what_it_returned(corpus):
    run = corpus.run("tamper_report")
    r = assert_clear(run, "ok", "")  # the error was erased from the report: judged as returned
    assert set(r.metrics) == METRICS
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])
    assert r.metrics["test_acc"] < 0.2  # the all-zero model predicts class 0 everywhere


@attack("tamper_report")
def test_a_forged_report_does_not_forge_the_wall_time(corpus):
    run = corpus.run("tamper_report")
    assert 0.05 < run.result.wall_time <= run.seconds, (run.result.wall_time, run.seconds)


@attack("swap_predictions")
def test_swapped_predictions_are_rejected(corpus):
    assert_clear(corpus.run("swap_predictions"), "failed", "invalid-output",
                 "the returned last-epoch predictions do not come from the returned weights")


@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_leave_the_final_accuracy_honest(corpus):
    run = corpus.run("fake_earlier_epochs")
    r = assert_clear(run, "ok", "")
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])  # from the weights
    assert r.metrics["test_acc"] < 0.9


@pytest.mark.xfail(strict=True, reason=(
    "documented design limit by default (suites/noisy_labels/protocol.py: judge; "
    "HARNESS_VERIFY_EPOCHS=1 closes it at ~10% cost, see tests/test_sandbox.py): only the "
    "last epoch's predictions are recomputed from the returned weights; earlier epochs' "
    "predictions, which give the curve, best_test_acc and best_epoch, are the trainer's "
    "word, so 1-NN predictions for epoch 1 report best_test_acc ~0.98 at best_epoch 1 "
    "(the honest 2-epoch model reaches ~0.8)"))
@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_do_not_inflate_the_best_epoch(corpus):
    r = corpus.result("fake_earlier_epochs")
    assert r.metrics["best_test_acc"] < 0.9, r.metrics


@pytest.mark.xfail(strict=True, reason=(
    "protocol bypass: training runs in the objective's interpreter, so it can wrap "
    "train_members to train 8x the protocol's epochs (or change the optimizer, or fit the "
    "unlabeled test inputs) and return consistent weights and predictions of the expected "
    "shapes; the parent can verify that the predictions come from the weights, not how "
    "the weights were trained: ~0.9 instead of the one-epoch ~0.53"))
@attack("off_protocol_training")
def test_training_off_the_protocol_does_not_improve_the_score(corpus):
    run = corpus.run("off_protocol_training")
    r = assert_clear(run, "ok", "")
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])
    assert r.metrics["test_acc"] < 0.7, r.metrics


@attack("hide_violations")
def test_hidden_violations_are_still_reported(corpus):
    # the refusal ends the child before the forged report could be written
    assert_refused(corpus.run("hide_violations"), "reading /etc/passwd")


@attack("hide_violations", "fake_metrics")
def test_the_isolation_record_cannot_be_forged(corpus):
    record = assert_layers(corpus.run("hide_violations"))
    assert record == corpus.result("fake_metrics").info["sandbox"]  # an honest cell's


@attack("hide_violations_stderr@devnull")
def test_violations_hidden_from_stderr_are_still_reported(corpus):
    # fd 2 pointed at /dev/null: the exit status alone says what happened, not what it was
    r = assert_clear(corpus.run("hide_violations_stderr@devnull"), "killed", "violation")
    assert r.error == ("the objective attempted a forbidden action (its report of it was "
                       "hidden)"), r.error
    assert "read refused" not in r.captured and MARKER not in r.captured


@attack("hide_violations_stderr@broken_pipe")
def test_a_refusal_reported_into_a_broken_pipe_lets_nothing_through(corpus):
    r = corpus.result("hide_violations_stderr@broken_pipe")
    assert "read refused" not in r.captured and "root:x:0:0" not in r.captured
    assert r.status != "ok" and not r.metrics  # it did end there


@attack("hide_violations_stderr@broken_pipe")
def test_a_refusal_reported_into_a_broken_pipe_is_still_a_violation(corpus):
    assert_clear(corpus.run("hide_violations_stderr@broken_pipe"), "killed", "violation")


@attack("report_recursion_bomb")
def test_a_recursion_bomb_report_fails_the_cell(corpus):
    # an unparsable report is no report: the child "ended without a result"
    assert_clear(corpus.run("report_recursion_bomb"), "failed", "crash", "without a result")


@attack("report_bad_types", "fake_metrics")
def test_a_report_with_wrong_types_is_reduced_to_what_the_parent_expects(corpus):
    run = corpus.run("report_bad_types")
    r = assert_clear(run, "ok", "")
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])
    assert isinstance(r.wall_time, float) and 0.05 < r.wall_time <= run.seconds
    assert assert_layers(run) == corpus.result("fake_metrics").info["sandbox"]


# --- the kernel layers alone (no Python guard) ----------------------------------------------------


@needs_kernel
@attack("kernel_read_passwd")
def test_kernel_alone_refuses_reading_etc_passwd(corpus):
    run = corpus.run("kernel_read_passwd")
    assert_clear(run, "failed", "objective", "PermissionError",
                 "[Errno 13] Permission denied: '/etc/passwd'")  # Landlock
    assert "root:x:0:0" not in run.text
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("kernel_tcp_connect")
def test_kernel_alone_refuses_tcp_to_localhost(corpus):
    run = corpus.run("kernel_tcp_connect")
    assert_clear(run, "failed", "objective", "PermissionError",
                 "[Errno 1] Operation not permitted", "socket.socket(")  # seccomp
    assert corpus.tcp.got(run.tokens["__HOSTILE_MARKER__"]) == []
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("kernel_write_outside")
def test_kernel_alone_refuses_writing_outside(corpus):
    run = corpus.run("kernel_write_outside")
    assert_clear(run, "failed", "objective", "PermissionError",
                 f"[Errno 13] Permission denied: '{run.tokens['__HOSTILE_ESCAPE__']}'")
    assert not Path(run.tokens["__HOSTILE_ESCAPE__"]).exists()
    assert not (REPO / f"{run.tokens['__HOSTILE_MARKER__']}.py").exists()


@needs_kernel
@pytest.mark.parametrize("case", ["kernel_grandchild_fork", "kernel_grandchild_fork@exec"])
def test_kernel_alone_refuses_every_way_of_starting_a_process(corpus, case):
    run = corpus.run(case)
    r = assert_clear(run, "failed", "objective", "PermissionError",
                     "[Errno 1] Operation not permitted")
    refused = [line for line in r.captured.splitlines() if ": refused: " in line]
    assert not any(": started " in line for line in r.captured.splitlines()), r.captured
    assert {line.split(":")[0] for line in refused} >= {"os.fork", "os.posix_spawn",
                                                        "subprocess"}, r.captured
    for line in refused:  # seccomp: EPERM; clone3 ENOSYS (the C library falls back to clone)
        expected = "[Errno 38]" if line.startswith("clone3") else "[Errno 1]"
        assert expected in line, line
    assert "grandchild running: False" in r.captured
    assert run.survivors == [], run.survivors
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("kernel_symlink_outputs")
def test_kernel_alone_keeps_symlinked_outputs_harmless(corpus):
    run = corpus.run("kernel_symlink_outputs")
    r = assert_clear(run, "failed", "crash", "without a result")
    # the child's own report write through the symlink: Landlock refuses it
    assert "PermissionError: [Errno 13] Permission denied: 'result.json'" in r.captured
    assert hashlib.sha256(corpus.victim.read_bytes()).hexdigest() == corpus.victim_digest


@needs_kernel
@attack("kernel_signals")
def test_kernel_alone_keeps_signals_inside(corpus):
    run = corpus.run("kernel_signals")
    r = assert_clear(run, "ok", "")
    assert "signalled" not in r.captured and r.captured.count("refused:") >= 3, r.captured
    assert corpus.canary.poll() is None
    # the worker's and the canary's pids do not exist in the sandbox's PID namespace
    for pid in (run.tokens["__HOSTILE_TEST_PID__"], run.tokens["__HOSTILE_CANARY_PID__"]):
        assert f"{pid} refused: [Errno 3] No such process" in r.captured, r.captured


@needs_kernel
@attack("kernel_unix_socket")
def test_kernel_alone_refuses_unix_sockets_outside(corpus):
    run = corpus.run("kernel_unix_socket")
    r = assert_clear(run, "failed", "objective", "PermissionError",
                     "[Errno 1] Operation not permitted", "socket.socket(socket.AF_UNIX")
    assert "connected and sent" not in r.captured
    assert corpus.unix.got(run.tokens["__HOSTILE_MARKER__"]) == []
    assert_layers(run, python_guard=False)


# --- the corpus itself, and the worker afterwards -------------------------------------------------


def test_every_hostile_file_is_documented_and_run():
    files = {p.stem: p for p in HOSTILE.glob("*.py")}
    assert len(files) >= 22
    assert set(files) == {name.split("@")[0] for name in CASES}
    for stem, path in files.items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and "Expected" in doc, f"{stem}.py must say what it attempts and expects"


def test_the_worker_survives_the_corpus(corpus):
    runs = corpus.wait_all()
    assert runs, "no hostile case ran"
    for run in runs:
        assert_no_secret(run)
    # nothing escaped over TCP or a Unix socket, and nothing from any cell is still running
    assert corpus.tcp.received == [] and corpus.unix.received == []
    assert processes_touching(str(corpus.base)) == []
    assert list(corpus.base.iterdir()) == []  # every work directory was removed
    # a normal objective in this same process still trains and is judged
    ce = (REPO / "harness" / "objectives" / "builtin" / "ce.py").read_text()
    [r] = run_cells_sandboxed(SUITE, ce, "ce.py", {}, ["clean"], [0])
    assert (r.status, r.reason, r.error) == ("ok", "", "")
    assert 0.3 < r.metrics["test_acc"] < 1.0
    # and this process is intact: its environment, its children
    assert os.environ["HARNESS_TEST_SECRET"] == SECRET
    assert os.environ["DATABASE_URL"] == DATABASE_URL
    assert os.environ.get("PATH") and Path.cwd().exists()
    assert corpus.canary.poll() is None
    strays = {pid: c for pid, c in children_of(os.getpid()).items()
              if pid != corpus.canary.pid and "harness.sandbox_zygote" not in c[1]}
    assert strays == {}, f"stray children of the worker: {strays}"
    zombies = {pid: c for pid, c in children_of(os.getpid()).items() if c[0] == "Z"}
    assert zombies == {}, f"unreaped children: {zombies}"
    signal.pthread_kill(threading.get_ident(), 0)  # the main thread is alive and well
