"""Hostile objectives against the sandbox: every attack in tests/hostile/ is contained.

Only the loss runs inside (docs/sandbox.md): the worker trains every member itself, and
each member's sandboxed loss server loads the objective file (its top-level code runs
there), says hello, then either traces its hook once into a graph the worker checks and
runs itself, or answers each hook call with the loss and its gradients. A server returns
no files; the guard reports a refusal on its own pipe (descriptor 4), never on the
output the objective controls.

Each file in tests/hostile/ is one attack, written as a plain objective module (its
docstring says what it attempts and what must happen). The corpus runs through the real
entry point, ``run_cells_sandboxed``, on the noisy-labels suite shortened to one epoch
(variant ``clean``, one seed), several cells at a time on a thread pool (the module fixture
starts only the cases the selected tests need, plus an honest cross-entropy cell per
number of epochs to compare scores with). Containment is checked from the worker's side,
independently of what the server says: marker files outside never appear, no process
carrying a case's marker survives the call, servers the test runs (TCP on 127.0.0.1, Unix
sockets outside the sandbox) receive nothing, the test process's secrets never show in a
cell's output or error, final test accuracy is recomputed here from the trained weights
with a plain forward pass, every request sent to a server is recorded here (what a server
was ever given), and a cheat without a forbidden action must score as plain
cross-entropy on the same seed (within ``CE_TOLERANCE``: the secret row order, keyed by
the code, changes the order of each batch's mean). Every cell must also end with a clear
status, reason and error.

A refusal by the guard ends the server at once (``killed``/``violation``, the error naming
that first refusal, taken from the report pipe or the guard's exit status): an
objective cannot catch it and carry on. So each file takes one attack path; a file with
several takes the one named by its case (``name@param``, the ``__HOSTILE_PARAM__``
placeholder), or all of them with the guard off (the kernel layers alone: the minimal
root and Landlock ENOENT/EACCES/EROFS, seccomp EPERM, the network and PID namespaces).
``assert_refused`` checks that exactly that refusal ended the cell, that it never went
through the objective's output, and that nothing after it ran; the containment checks
above hold independently. Output the objective wants seen before a refusal is flushed:
``os._exit`` drops what stdout still buffers. One attack switches the guard off from
inside (raw memory) to show what the kernel answers then; another looks for Debian's
``_cffi_backend``, which the minimal root no longer holds.

A known hole, when one is found, is pinned with ``xfail(strict=True)`` until it is
fixed (an XPASS then turns the suite red, so the mark must go); none is open now.
(Raw memory switches the guard off from inside, by design — the guard is an early
error, not a wall — and what holds then is tested by the kernel cases.)

Nothing here runs a real fork or thread bomb: those attacks are bounded (at most 512
short-lived threads, a handful of single processes), whether or not a layer holds; the
memory bombs against the worker are bounded at about 1 GiB.
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

from harness.contract.registry import get_suite
from harness.contract.suite import REASONS, CellResult
from harness.data import data_root
from harness.runner.sandboxed import run_cells_sandboxed
from harness.sandbox import Limits, SandboxUnavailable, isolation_support, remote
from harness.sandbox.guard import MARKER
from suites.noisy_labels import pipeline as protocol

REPO = Path(__file__).resolve().parents[1]
HOSTILE = Path(__file__).resolve().parent / "hostile"
SUITES_DIR = REPO / "suites"  # a read root of the sandbox
# Files a case may change the metadata of (created per case when its code names them):
# one outside every root, one inside a read root (removed again right after the case).
VICTIMS = ("__HOSTILE_OWN_VICTIM__", "__HOSTILE_READABLE_VICTIM__")
VICTIM_TEXT = "this case's victim\n"
# One member a job (Suite.chunk = 1): one hostile server per case, as the cases expect;
# the chunk changes nothing a hostile case checks (harness/contract/chunks.py).
SUITE = dataclasses.replace(get_suite("noisy-labels").shortened(1), chunk=1)
SECRET = f"hostile-secret-{uuid.uuid4().hex}"
DATABASE_URL = f"postgres://harness:{SECRET}-db@db.internal:5432/harness"
SUPPORT = isolation_support()
NAMESPACES = bool(SUPPORT["namespaces"])
LANDLOCK = int(SUPPORT["landlock"])
WORKERS = 3  # cells in flight at once; the parent mostly waits on its children
METRICS = {"test_acc", "best_test_acc", "best_epoch", "noise_rate", "train_acc_clean"}
THREAD_LIMIT = 64  # Limits.processes of the thread floods (the pids cgroup's pids.max)

ISOLATION_KEYS = {"mode", "namespaces", "uid", "landlock", "seccomp", "python_guard",
                  "pids_cgroup", "memory_cgroup", "tmpfs_workdir", "protocol", "servers",
                  "served", "row_order"}
# The error of a violation whose report the objective kept from the report pipe.
REPORT_HIDDEN = "the objective attempted a forbidden action (its report of it was hidden)"
CE = (REPO / "harness" / "objectives" / "builtin" / "ce.py").read_text()
# |Δ| of a metric between two plain cross-entropy cells of the same seed whose rows came
# in different secret orders (the order is keyed by the code).
CE_TOLERANCE = 0.03
# The most the worker may grow by while it refuses or runs what an objective sent it.
WORKER_GROWTH = 256 << 20
# What the kernel answers (errno) when the guard is not there to refuse first: the
# minimal root (ENOENT: the path does not exist for the job), Landlock (EACCES, EXDEV for
# a cross-directory rename or link), its read-only root (EROFS), seccomp (EPERM), the PID
# namespace (ESRCH).
NO_FILE = {errno.ENOENT, errno.EACCES}
NO_WRITE = {errno.ENOENT, errno.EACCES, errno.EROFS}


def _has_controller(name: str) -> bool:
    """Whether the fork server can put a job in a cgroup of this controller (v1 or v2)."""
    if Path(f"/sys/fs/cgroup/{name}/cgroup.procs").exists():
        return True
    try:
        return name in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        return False


PIDS_CGROUP = _has_controller("pids")
MEMORY_CGROUP = _has_controller("memory")

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
REBOUND = {"_real": "harness.sandbox.guard._real", "fsdecode": "os.fsdecode",
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
    **variants("memory_50gb", ["traced", "per_call"]),
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
    "graph_bomb": Case(measure_memory=True),
    "fake_metrics": Case(),
    "swap_predictions": Case(),
    "fake_earlier_epochs": Case(epochs=2),
    "off_protocol_training": Case(),
    **variants("tamper_report", ["forged_ok", "no_verdict"]),
    **variants("hide_violations", ["junk", "devnull", "closed"]),
    **variants("hide_violations_stderr", ["devnull", "broken_pipe"]),
    **variants("violation_in_blocked_thread", ["replaced", "flooded"]),
    "report_recursion_bomb": Case(),
    "report_bad_types": Case(),
    "forged_violation": Case(),
    "terminal_escapes": Case(),
    **variants("exfiltrate_test_set", ["output", "error"]),
    "row_key": Case(),
    "row_key@kernel": KERNEL,
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
    "executable_memory": Case(),
    "executable_memory@kernel": KERNEL,
    **variants("raw_memory_guard", ["numpy", "ctypes"], requires="kernel"),
    "cffi_backend": KERNEL,
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
        mp.delenv("HARNESS_SANDBOX_KEY", raising=False)  # the key file is the one to attack
        mp.setattr(protocol.NoisyLabels, "judge", _recording_judge(protocol.NoisyLabels.judge))
        mp.setattr(protocol.NoisyLabels, "prepare",
                   _recording_prepare(protocol.NoisyLabels.prepare))
        mp.setattr(remote.LossServers, "call", _recording_call(remote.LossServers.call))
        mp.setattr(remote.LossServers, "trace", _recording_trace(remote.LossServers.trace))
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
    """The isolation record is the worker's: every key, and the layers this case asked for."""
    record = run.result.info["sandbox"]
    assert set(record) == ISOLATION_KEYS, record
    mode = CASES[run.name].mode if run.name in CASES else ""
    assert record["mode"] == (mode or "fork"), record
    assert record["python_guard"] is python_guard, record
    assert record["namespaces"] is NAMESPACES and record["landlock"] == (LANDLOCK or None)
    assert record["seccomp"] is True, record
    assert (record["protocol"], record["servers"]) == ("loss-only", 1), record
    assert isinstance(record["served"], dict), record
    if mode == "exec":  # no fork server: no cgroups, no tmpfs work directory
        assert not (record["pids_cgroup"] or record["memory_cgroup"]
                    or record["tmpfs_workdir"]), record
    else:
        assert record["pids_cgroup"] is PIDS_CGROUP, record
        assert record["memory_cgroup"] is MEMORY_CGROUP, record
        assert record["tmpfs_workdir"] is NAMESPACES, record
    return record


def started_count(output: str, pattern: str) -> int:
    found = re.search(pattern, output)
    assert found, f"{pattern!r} not in the output: {output[-500:]!r}"
    return int(found.group(1))


def assert_refused(run: Run, what: str, *, pattern: bool = False) -> CellResult:
    """The guard's first refusal ended the server: ``killed``/``violation``, the error is
    exactly that one refusal (``what``; a regular expression if ``pattern``), taken from the
    report pipe (the objective's output never holds it), and nothing the objective meant
    to do after it ran."""
    r = assert_clear(run, "killed", "violation")
    expected = what if pattern else re.escape(what)
    assert re.fullmatch(f"sandbox: {expected} is not allowed", r.error), (
        f"{run.name}: the error is not the one refusal {what!r}: {r.error!r}")
    assert MARKER.strip() not in r.captured, r.captured[-1500:]  # the report pipe, only
    assert "still running after" not in r.captured and "succeeded" not in r.captured, r.captured
    assert not r.metrics, r.metrics
    return r


def assert_scores_as_ce(run: Run, corpus: Corpus) -> CellResult:
    """An ``ok`` cell, judged from its own weights, that scores as plain cross-entropy on
    the same seed and epochs (within ``CE_TOLERANCE``)."""
    r = assert_clear(run, "ok", "")
    honest = corpus.honest(CASES[run.name].epochs).result
    assert set(r.metrics) == set(honest.metrics) == METRICS, r.metrics
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])  # from the weights
    for key in ("test_acc", "best_test_acc", "train_acc_clean"):
        assert abs(r.metrics[key] - honest.metrics[key]) <= CE_TOLERANCE, (
            f"{run.name}: {key} {r.metrics[key]:.4f}, plain cross-entropy "
            f"{honest.metrics[key]:.4f}")
    return r


def kernel_answers(output: str) -> dict[str, int]:
    """``name: refused [Errno N] ...`` lines of an attack's output, as name -> errno."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(.+?): refused \[Errno (\d+)\]", output, re.M)}


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
    r = assert_clear(run, "failed", "objective", "webapp/settings.py")
    assert "environment: {}" in r.captured and "=>" not in r.captured, r.captured
    # the minimal root has no webapp/ (ENOENT); Landlock would refuse it anyway (EACCES)
    for name in ("webapp/settings.py", "webapp/settings_test.py"):  # present in the repo
        found = re.search(rf"^{re.escape(name)}: \w+Error: \[Errno (\d+)\]", r.captured, re.M)
        assert found and int(found.group(1)) in NO_FILE, r.captured
    assert_layers(run, python_guard=False)


@pytest.mark.parametrize("case", cases_of("import_webapp_settings"))
def test_importing_the_web_settings_is_refused(corpus, case):
    run = corpus.run(case)
    package = IMPORTS[CASES[case].param]
    assert_not_importable(run, package)
    assert "DATABASES" not in run.result.captured and "broker" not in run.result.captured


def assert_not_importable(run: Run, package: str) -> None:
    """The package is nowhere the server can import it from: the minimal root holds only
    the read roots (ModuleNotFoundError), or where the import system finds it, the guard
    refuses its first look into it (listing it, or reading its __init__ or bytecode)."""
    if run.result.reason == "violation":
        assert_refused(run, rf"(listing /\S*/{package}|reading /\S*/{package}/\S+)",
                       pattern=True)
    else:
        assert_clear(run, "failed", "objective", f"No module named '{package}'")


@pytest.mark.parametrize("case", cases_of("digits_labels"))
def test_the_suites_label_files_are_out_of_reach(corpus, case):
    run = corpus.run(case)
    if CASES[case].param == "import":
        assert_not_importable(run, "sklearn")
    else:  # the guard sees the path first (the kernel: not in the minimal root)
        assert_refused(run, r"reading /\S*/site-packages/sklearn/datasets/data/digits\.csv\.gz",
                       pattern=True)
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
    r = assert_scores_as_ce(run, corpus)
    assert "heap walked: label_like_arrays=0" in r.captured, r.captured
    assert "FOUND modules=[] cached=0" in r.captured
    assert_layers(run, python_guard=False)


@attack("sibling_workdirs")
def test_other_cells_work_directories_are_out_of_reach(corpus):
    run = corpus.run("sibling_workdirs")
    # both directories are ancestors of the work directory, which the guard lets the import
    # system list: the kernel stops it (Landlock's EACCES; in the minimal root the base
    # holds nothing but this server's own work directory anyway)
    r = assert_clear(run, "failed", "objective", str(corpus.base))
    found = re.search(r"raised \w+Error while loading: \[Errno (\d+)\]", r.error)
    assert found and int(found.group(1)) in NO_FILE, r.error
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
    r = assert_scores_as_ce(run, corpus)  # every error swallowed, then it trained
    escape = run.tokens["__HOSTILE_ESCAPE__"]
    for suffix in RENAMES.values():
        assert not os.path.lexists(escape + suffix)
    assert "succeeded" not in r.captured and r.captured.count(" failed: ") == 4, r.captured
    # Landlock refuses a rename or link out of the work directory as a cross-directory
    # reference (EXDEV) or creating anything outside (EACCES); the minimal root is
    # read-only (EROFS) and holds no /etc/passwd (ENOENT)
    for name, refused, target in (("rename", {errno.EXDEV, *NO_WRITE}, escape),
                                  ("link", {errno.EXDEV, *NO_WRITE}, escape),
                                  ("symlink", NO_WRITE, escape),
                                  ("dir_fd", NO_FILE, "self/root/etc/passwd")):
        found = re.search(rf"^{name} failed: \[Errno (\d+)\] .*'{re.escape(target)}", r.captured,
                          re.M)
        assert found and int(found.group(1)) in refused, (name, r.captured)
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("rename_outside@dir_fd")
def test_a_dir_fd_outside_the_work_directory_is_refused_and_reported(corpus):
    """The audit event of a dir_fd-relative open carries no dir_fd, so the guard refuses
    the descriptor itself: a directory outside the work directory opened as one. (Without
    the guard the kernel refuses the read: test_kernel_alone_refuses_renames_links_...)"""
    run = corpus.run("rename_outside@dir_fd")
    assert_refused(run, "opening the directory /proc as a descriptor")
    assert "root:x:0:0" not in run.text and "succeeded" not in run.result.captured


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
    # a read the guard let through would print (the output is captured to the end)
    assert "root:x:0:0" not in r.captured and "read /etc/passwd" not in r.captured
    assert "still running after the refusal" not in r.captured
    if CASES[case].param == "status":
        assert r.error == "sandbox: reading /etc/passwd is not allowed", r.error


@needs_kernel
@pytest.mark.parametrize("case", [
    "guard_exit_status@status",
    "guard_exit_status@after_report",
])
def test_a_refusal_is_reported_whatever_status_it_chose(corpus, case):
    assert_refused(corpus.run(case), "reading /etc/passwd")


@pytest.mark.parametrize("case", cases_of("violation_in_blocked_thread"))
def test_a_refusal_cannot_be_held_back_by_its_report(corpus, case):
    run = corpus.run(case)
    r = run.result
    assert "root:x:0:0" not in r.captured and "read /etc/passwd" not in r.captured
    assert "refusing thread still blocked" not in r.captured  # it ended at the refusal
    assert_clear(run, "killed", "violation")
    if CASES[case].param == "replaced":  # the guard writes to the report pipe it was given
        assert r.error == REPORT_HIDDEN, r.error
    else:  # flooded: its line is the report's, or drowned out by the objective's
        assert r.error in ("sandbox: reading /etc/passwd is not allowed", REPORT_HIDDEN), r.error


# --- resource limits ----------------------------------------------------------------------------


@attack("memory_50gb@per_call")
def test_allocating_50_gb_is_killed_for_memory(corpus):
    run = corpus.run("memory_50gb@per_call")
    assert_clear(run, "killed", "memory", "allocate")
    assert run.result.info["sandbox"]["served"]["classification_loss"].startswith("per call")


@attack("memory_50gb@traced")
def test_a_traced_50_gb_allocation_is_refused_before_it_is_made(corpus):
    # traced on fake tensors in the server (nothing allocated there); the worker checks the
    # graph's sizes on meta tensors before its first real call, will not run it and serves
    # it per call instead: the allocation is then the sandbox's to refuse
    run = corpus.run("memory_50gb@traced")
    assert_clear(run, "killed", "memory", "allocate")
    assert run.result.info["sandbox"]["served"]["classification_loss"] == (
        "per call: the traced hook makes a tensor of 50,000,000,000 elements "
        "(at most 4,194,304)")
    assert run.peak_growth is None or run.peak_growth < WORKER_GROWTH


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


# --- what a server returns: replies, graphs, files, metrics ---------------------------------


@attack("pickle_object_array")
def test_files_a_server_leaves_are_never_read(corpus):
    run = corpus.run("pickle_object_array")
    assert_scores_as_ce(run, corpus)
    assert not Path(run.tokens["__HOSTILE_PICKLE_MARKER__"]).exists()


@attack("pickle_raw_file")
def test_a_pickle_sent_as_a_reply_is_never_unpickled(corpus):
    run = corpus.run("pickle_raw_file")
    assert_clear(run, "failed", "invalid-output", "broke the protocol",
                 "a reply header that is not JSON")
    assert not Path(run.tokens["__HOSTILE_PICKLE_MARKER__"]).exists()


@pytest.mark.parametrize(("case", "why"), [
    ("zip_bomb_outputs", "a reply header of 4,294,967,295 bytes"),
    ("npy_header_bomb", "more bytes than a reply holds")])
def test_a_size_bomb_in_a_reply_is_refused_without_allocating_it(corpus, case, why):
    run = corpus.run(case)
    assert_clear(run, "failed", "invalid-output", "broke the protocol", why)
    if run.peak_growth is None:
        pytest.skip("cannot reset the peak RSS (/proc/self/clear_refs) here")
    assert run.peak_growth < WORKER_GROWTH, f"the worker grew by {run.peak_growth >> 20} MiB"


@attack("graph_bomb")
def test_a_graph_cannot_make_the_worker_hold_more_than_a_bound(corpus):
    """Intermediates each under the bound, together far over it: the worker does not run
    the graph (the sum is bounded too) and the hook is served per call, in the sandbox."""
    run = corpus.run("graph_bomb")
    r = assert_scores_as_ce(run, corpus)
    assert r.info["sandbox"]["served"]["classification_loss"].startswith(
        "per call: the traced hook's intermediates add up to"), r.info["sandbox"]["served"]
    if run.peak_growth is not None:
        assert run.peak_growth < WORKER_GROWTH, f"the worker grew by {run.peak_growth >> 20} MiB"


@attack("fake_metrics")
def test_faked_metrics_inside_do_not_change_the_judged_ones(corpus):
    run = corpus.run("fake_metrics")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.9 and r.metrics["train_acc_clean"] < 0.9


@attack("tamper_report@forged_ok")
def test_a_forged_reply_is_scored_as_what_it_answered(corpus):
    run = corpus.run("tamper_report@forged_ok")
    r = assert_clear(run, "ok", "")  # its error was turned into an answer: judged as one
    assert set(r.metrics) == METRICS
    assert r.metrics["test_acc"] == pytest.approx(run.accuracies[0])  # from the weights
    # zero gradients on every call: the untrained model, about one digit in ten
    assert r.metrics["test_acc"] < 0.2 and r.metrics["train_acc_clean"] < 0.2, r.metrics
    assert r.info["sandbox"]["served"]["classification_loss"].startswith("per call")
    assert len(run.sent) > 1  # answered call after call


@attack("tamper_report@forged_ok")
def test_a_forged_reply_does_not_forge_the_wall_time(corpus):
    run = corpus.run("tamper_report@forged_ok")
    assert 0.05 < run.result.wall_time <= run.seconds, (run.result.wall_time, run.seconds)


@attack("tamper_report@no_verdict")
def test_a_reply_without_a_verdict_fails_the_cell(corpus):
    r = corpus.result("tamper_report@no_verdict")
    assert r.status == "failed" and not r.metrics, (r.status, r.metrics)
    assert "1.0" not in r.error and "0.001" not in r.error, r.error  # nothing of its header


@attack("tamper_report@no_verdict")
def test_a_reply_without_a_verdict_is_an_invalid_output(corpus):
    assert_clear(corpus.run("tamper_report@no_verdict"), "failed", "invalid-output",
                 "broke the protocol")


@attack("swap_predictions")
def test_predictions_cannot_be_swapped_from_inside(corpus):
    run = corpus.run("swap_predictions")
    r = assert_scores_as_ce(run, corpus)
    assert "found: nothing; wrapper called 0 times" in r.captured, r.captured


@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_leave_the_final_accuracy_honest(corpus):
    run = corpus.run("fake_earlier_epochs")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.9
    assert "found no x_eval; wrapper called 0 times" in r.captured, r.captured


@attack("fake_earlier_epochs")
def test_faked_earlier_epochs_do_not_inflate_the_best_epoch(corpus):
    # every epoch's predictions are the worker's own: 1-NN on the training set would
    # have reported best_test_acc ~0.98 at best_epoch 1
    r = corpus.result("fake_earlier_epochs")
    assert r.metrics["best_test_acc"] < 0.9, r.metrics


@attack("off_protocol_training")
def test_training_off_the_protocol_does_not_improve_the_score(corpus):
    run = corpus.run("off_protocol_training")
    r = assert_scores_as_ce(run, corpus)
    assert r.metrics["test_acc"] < 0.7, r.metrics  # one epoch, not eight
    assert "wrapped train_members called 0 times" in r.captured, r.captured


@pytest.mark.parametrize("case", cases_of("hide_violations"))
def test_a_violation_whose_report_is_hidden_is_still_reported(corpus, case):
    # the guard's exit status says what happened, not what it was
    r = assert_clear(corpus.run(case), "killed", "violation")
    assert r.error == REPORT_HIDDEN, r.error
    assert "still running after the refusal" not in r.captured and not r.metrics


@attack("hide_violations@junk", "fake_metrics")
def test_the_isolation_record_cannot_be_forged(corpus):
    record = assert_layers(corpus.run("hide_violations@junk"))
    honest = corpus.result("fake_metrics").info["sandbox"]
    assert record["served"] == {}  # it ended before its hook was ever asked for
    # every field but what differs by objective: the hooks served and its row-order key
    assert {**record, "served": None, "row_order": None} == {
        **honest, "served": None, "row_order": None}
    assert len(record["row_order"]) == 16 and record["row_order"] != honest["row_order"]


@pytest.mark.parametrize("case", cases_of("hide_violations_stderr"))
def test_violations_hidden_from_stderr_are_still_reported(corpus, case):
    r = assert_refused(corpus.run(case), "reading /etc/passwd")
    assert "read refused" not in r.captured and "root:x:0:0" not in r.captured


@attack("report_recursion_bomb")
def test_a_recursion_bomb_reply_fails_the_cell(corpus):
    run = corpus.run("report_recursion_bomb")
    assert run.raised is None, run.raised
    assert_clear(run, "failed", "invalid-output", "a reply header that is not JSON",
                 "RecursionError")


@attack("report_bad_types", "fake_metrics")
def test_a_hello_with_wrong_types_is_reduced_to_what_the_worker_expects(corpus):
    run = corpus.run("report_bad_types")
    r = assert_scores_as_ce(run, corpus)
    assert isinstance(r.wall_time, float) and 0.05 < r.wall_time <= run.seconds
    assert {**assert_layers(run), "row_order": None} == {
        **corpus.result("fake_metrics").info["sandbox"], "row_order": None}
    # the hook's own two tensors, never an ``index`` it declared it wanted
    assert run.traced or run.sent
    assert all(len(shapes) == 2 for _, shapes in run.traced + run.sent), (run.traced, run.sent)


# --- what a server is given, and what it may print --------------------------------------------


@attack("forged_violation")
def test_a_forged_violation_report_is_only_output(corpus):
    run = corpus.run("forged_violation")
    r = assert_scores_as_ce(run, corpus)
    assert r.error == ""
    forged = "[sandbox violation] sandbox: reading /etc/passwd is not allowed (load, std"
    assert f"{forged}out)" in r.captured and f"{forged}err)" in r.captured, r.captured


@attack("terminal_escapes")
def test_terminal_escapes_are_stored_as_printed(corpus):
    run = corpus.run("terminal_escapes")
    r = assert_scores_as_ce(run, corpus)
    for sequence in ("\x1b]0;owned by the objective\x07", "\x1b]52;c;cm0gLXJmIH4K\x07",
                     "\x1b[2J\x1b[H", "\x9b31mcsi\x9b0m", "all good\r\x1b[Kfaked line\x08\x08",
                     "nul\x00byte"):
        assert f"load: {sequence}" in r.captured, (sequence, r.captured)


def _rows_sent(run: Run) -> list[int]:
    """The rows of every request the worker sent (each one member's batch)."""
    batch = SUITE.settings["batch_size"]
    rows = []
    for hook, shapes in run.sent:
        assert hook == "classification_loss"
        assert len({shape[:2] for shape in shapes}) == 1, shapes  # one batch in each tensor
        members, count = shapes[0][:2]
        assert members == 1 and 0 < count <= batch, shapes
        assert run.job["test"] not in [d for shape in shapes for d in shape], shapes
        rows.append(count)
    return rows


@attack("exfiltrate_test_set@output")
def test_a_server_is_given_its_own_batches_only(corpus):
    run = corpus.run("exfiltrate_test_set@output")
    r = assert_scores_as_ce(run, corpus)
    assert r.info["sandbox"]["served"]["classification_loss"].startswith("per call")
    assert run.traced == []  # progress and state in its context: never a graph
    # the worker's record: one epoch of training batches, nothing the size of the test set
    assert sum(_rows_sent(run)) == run.job["train"], (run.sent, run.job)
    # the server's own account: the same batches, and the targets of the training set
    rows = [int(n) for n in re.findall(r"^call \d+: rows=(\d+) ", r.captured, re.M)]
    assert rows == _rows_sent(run), r.captured[:3000]
    seen = [int(t) for line in re.findall(r"^targets \d+: \[(.*)\]$", r.captured, re.M)
            for t in line.split(",")]
    assert np.array_equal(np.bincount(seen, minlength=10),
                          np.bincount(run.job["labels"][0], minlength=10))


@attack("exfiltrate_test_set@error")
def test_an_error_carries_no_more_than_a_servers_own_batches(corpus):
    run = corpus.run("exfiltrate_test_set@error")
    r = assert_clear(run, "failed", "objective", "everything I was given", "call 1 logits")
    assert len(r.error) <= 20_000 + 1000  # a server's error text is capped (five full
    # batches are longer: the dump is cut)
    assert len(_rows_sent(run)) == 5 and not r.metrics
    assert "call 6" not in r.error


@attack("row_key")
def test_the_row_order_key_is_out_of_reach(corpus):
    run = corpus.run("row_key")
    r = assert_refused(run, f"reading {corpus.key_file}")
    assert "environment key: None" in r.captured, r.captured  # the scrubbed environment
    assert corpus.key.decode(errors="replace") not in run.text


@needs_kernel
@attack("row_key@kernel")
def test_kernel_alone_keeps_the_row_order_key_out_of_reach(corpus):
    run = corpus.run("row_key@kernel")
    r = assert_scores_as_ce(run, corpus)
    assert "environment key: None" in r.captured, r.captured
    assert kernel_answers(r.captured).get("key file") in NO_FILE, r.captured
    assert corpus.key.decode(errors="replace") not in run.text
    assert_layers(run, python_guard=False)


# --- the kernel layers alone (no Python guard) ----------------------------------------------------


@attack("executable_memory")
def test_executable_memory_is_refused_by_the_guard(corpus):
    run = corpus.run("executable_memory")
    assert_refused(run, "mapping files into memory (mmap.__new__)")


@needs_kernel
@attack("executable_memory@kernel")
def test_kernel_alone_refuses_new_executable_memory(corpus):
    """seccomp's W^X rule: no anonymous executable mapping, no mprotect to PROT_EXEC."""
    run = corpus.run("executable_memory@kernel")
    r = assert_clear(run, "failed", "objective", "Operation not permitted")
    answers = kernel_answers(r.captured)
    assert answers.get("anonymous rwx") == errno.EPERM, r.captured
    assert "mapped" not in r.captured, r.captured
    assert_layers(run, python_guard=False)


@pytest.mark.parametrize("case", cases_of("raw_memory_guard"))
def test_with_the_guard_switched_off_the_kernel_holds(corpus, case):
    """Raw memory (numpy's array interface, an out-of-bounds ctypes pointer) empties the
    guard's hook list; every forbidden attempt after it is the kernel's to refuse."""
    run = corpus.run(case)
    r = run.result
    if "was not found" in r.captured:
        pytest.skip(f"the interpreter's layout was not found: {r.captured[:300]}")
    r = assert_scores_as_ce(run, corpus)
    assert "emptied the list of" in r.captured, r.captured
    # system() cannot start a shell (seccomp): glibc reports exit status 127 (32512)
    succeeded = [line for line in r.captured.splitlines() if ": SUCCEEDED " in line]
    assert succeeded == ["system: SUCCEEDED 32512"], r.captured
    answers = kernel_answers(r.captured)
    for name, expected in {"read /etc/passwd": NO_FILE, "write outside": NO_WRITE,
                           "tcp connect": {errno.EPERM}, "fork": {errno.EPERM},
                           "executable mapping": {errno.EPERM}}.items():
        assert answers.get(name) in expected, (name, r.captured)
    assert "root:x:0:0" not in run.text
    assert not Path(run.tokens["__HOSTILE_ESCAPE__"]).exists()
    assert corpus.tcp.got(run.tokens["__HOSTILE_MARKER__"]) == []
    assert corpus.canary.poll() is None


@needs_kernel
@attack("cffi_backend")
def test_debians_cffi_backend_is_not_in_the_sandbox(corpus):
    """A native module no audit event sees (it calls libc, maps executable memory) is not
    among the read roots: /usr/lib holds only the shared libraries there."""
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    if not list(Path("/usr/lib/python3/dist-packages").glob(f"_cffi_backend.{tag}-*.so")):
        pytest.skip(f"this machine has no Debian _cffi_backend for {tag}")
    run = corpus.run("cffi_backend")
    r = assert_scores_as_ce(run, corpus)
    assert f"no _cffi_backend for {tag}" in r.captured and "loaded" not in r.captured, (
        r.captured)
    assert_layers(run, python_guard=False)



@needs_kernel
@attack("kernel_read_passwd")
def test_kernel_alone_refuses_reading_etc_passwd(corpus):
    run = corpus.run("kernel_read_passwd")
    # the minimal root has no /etc/passwd (ENOENT); Landlock would refuse it anyway (EACCES)
    r = assert_clear(run, "failed", "objective", "'/etc/passwd'")
    assert re.search(r"\[Errno (2|13)\]", r.error), r.error
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
    r = assert_clear(run, "failed", "objective", f"'{run.tokens['__HOSTILE_ESCAPE__']}'")
    # the minimal root's /tmp is read-only (EROFS) or absent; Landlock refuses it (EACCES)
    found = re.search(r"\[Errno (\d+)\]", r.error)
    assert found and int(found.group(1)) in NO_WRITE, r.error
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
    # a loss server writes no report and the worker reads nothing from its work directory
    assert_scores_as_ce(run, corpus)
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
    assert (r.status, r.reason, r.error) == ("ok", "", ""), (r.error, r.captured)
    assert 0.3 < r.metrics["test_acc"] < 1.0
    # and this process is intact: its environment, its children
    assert os.environ["HARNESS_TEST_SECRET"] == SECRET
    assert os.environ["DATABASE_URL"] == DATABASE_URL
    assert os.environ.get("PATH") and Path.cwd().exists()
    assert corpus.canary.poll() is None
    strays = {pid: c for pid, c in children_of(os.getpid()).items()
              if pid != corpus.canary.pid and "harness.sandbox.zygote" not in c[1]}
    assert strays == {}, f"stray children of the worker: {strays}"
    zombies = {pid: c for pid, c in children_of(os.getpid()).items() if c[0] == "Z"}
    assert zombies == {}, f"unreaped children: {zombies}"
    signal.pthread_kill(threading.get_ident(), 0)  # the main thread is alive and well
