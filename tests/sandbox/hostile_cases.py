"""The hostile corpus (tests/sandbox/hostile/): its cases, and the checks its tests make.

Not a test module: the test_hostile_*.py files beside it hold the tests, one attack
family each (docs/sandbox.md's threats): files and secrets outside the work directory
(test_hostile_files.py); the network, processes, signals and native code
(test_hostile_processes.py, with the corpus itself and the worker afterwards); resources,
crashes and broken losses (test_hostile_resources.py); lying on the wire — replies,
graphs, the hello, output (test_hostile_replies.py); tampering with the guard and the
harness in the objective's own interpreter (test_hostile_guard.py); cheating on the
metric without a forbidden action (test_hostile_metric.py). hostile_corpus.py runs the
cases; the ``corpus`` fixture (conftest.py) starts one corpus per test module.

Only the loss runs inside (docs/sandbox.md): the worker trains every member itself, and
each member's sandboxed loss server loads the objective file (its top-level code runs
there), says hello, then either traces its hook once into a graph the worker checks and
runs itself, or answers each hook call with the loss and its gradients. A server returns
no files; the guard reports a refusal on its own pipe (descriptor 4), never on the
output the objective controls.

Each file in tests/sandbox/hostile/ is one attack, written as a plain objective module
(its docstring says what it attempts and what must happen). The corpus runs through the
real entry point, ``run_cells_sandboxed``, on the noisy-labels suite shortened to one
epoch (variant ``clean``, one seed), several cells at a time on a thread pool (the module
fixture starts only the cases its module's selected tests need, plus an honest
cross-entropy cell per number of epochs to compare scores with). Containment is checked
from the worker's side, independently of what the server says: marker files outside
never appear, no process carrying a case's marker survives the call, servers the test
runs (TCP on 127.0.0.1, Unix sockets outside the sandbox) receive nothing, the test
process's secrets never show in a cell's output or error, final test accuracy is
recomputed here from the trained weights with a plain forward pass, every request sent to
a server is recorded here (what a server was ever given), and a cheat without a
forbidden action must score as plain cross-entropy on the same seed (within
``CE_TOLERANCE``: the secret row order, keyed by the code, changes the order of each
batch's mean). Every cell must also end with a clear status, reason and error.

A refusal by the guard ends the server at once (``killed``/``violation``, the error naming
that first refusal, taken from the report pipe or the guard's exit status): an
objective cannot catch it and carry on. So each file takes one attack path; a file with
several takes the one named by its case (``name@param``, the ``__HOSTILE_PARAM__``
placeholder), or all of them with the guard off (the kernel layers alone: the minimal
root and Landlock ENOENT/EACCES/EROFS, seccomp EPERM, the network and PID namespaces).
``assert_refused`` checks that exactly that refusal ended the cell, that it never went
through the objective's output, and that nothing after it ran; the containment checks
above hold independently. Output the objective wants seen before a refusal is flushed:
``os._exit`` drops what stdout still buffers.

A known hole, when one is found, is pinned with ``xfail(strict=True)`` until it is
fixed (an XPASS then turns the suite red, so the mark must go); none is open now.
(Raw memory switches the guard off from inside, by design — the guard is an early
error, not a wall — and what holds then is tested by the kernel cases.)

Nothing here runs a real fork or thread bomb: those attacks are bounded (at most 512
short-lived threads, a handful of single processes), whether or not a layer holds; the
memory bombs against the worker are bounded at about 1 GiB.
``HARNESS_HOSTILE_TABLE=1 pytest -s tests/sandbox/test_hostile_*.py`` prints attack →
outcome.
"""

from __future__ import annotations

import dataclasses
import errno
import re
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.contract.registry import get_suite
from harness.contract.suite import REASONS, CellResult
from harness.sandbox import isolation_support
from harness.sandbox.guard import MARKER

if TYPE_CHECKING:
    from tests.sandbox.hostile_corpus import Corpus, Run

REPO = Path(__file__).resolve().parents[2]
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
# guard_rebind: what each case rebinds (the guard captures all of them at install now, or no
# longer calls them); the first three were the first captured
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
    "no_gradient_loss": Case(),
    "custom_function_ce": Case(),
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
    "inherited_shared_pages": KERNEL,
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


def cases_of(stem: str, *params: str) -> list[str]:
    """The corpus cases of ``stem`` (those with these parameters, if any are given)."""
    return [n for n in CASES if n.split("@")[0] == stem and not CASES[n].mode
            and (not params or CASES[n].param in params)]


def fill(template: str, run: Run) -> str:
    return template.format(escape=run.tokens["__HOSTILE_ESCAPE__"], repo=REPO,
                           marker=run.tokens["__HOSTILE_MARKER__"])


# --- what a test checks of a run -----------------------------------------------------------


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


def assert_not_importable(run: Run, package: str) -> None:
    """The package is nowhere the server can import it from: the minimal root holds only
    the read roots (ModuleNotFoundError), or where the import system finds it, the guard
    refuses its first look into it (listing it, or reading its __init__ or bytecode)."""
    if run.result.reason == "violation":
        assert_refused(run, rf"(listing /\S*/{package}|reading /\S*/{package}/\S+)",
                       pattern=True)
    else:
        assert_clear(run, "failed", "objective", f"No module named '{package}'")

