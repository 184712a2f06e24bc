"""Hostile objectives that reach out of their process: the network (TCP on the loopback,
Unix sockets outside), new processes (fork bombs, grandchildren that would outlive the
cell, thread floods), signals to the worker and its neighbours, and native code (ctypes,
an extension of its own, executable memory, Debian's _cffi_backend) (docs/sandbox.md:
the network and PID namespaces, the pids cgroup, seccomp, W^X, the noexec work directory,
the guard). The @kernel cases run with the guard off; the @exec cases in exec mode, whose
documented gaps (no pids cgroup, no noexec work directory) strict mode refuses. Last, the
corpus itself (every file documented and run) and the worker after this module's corpus.
"""

from __future__ import annotations

import ast
import errno
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from harness.runner.sandboxed import run_cells_sandboxed
from harness.sandbox import SandboxUnavailable
from tests.sandbox.hostile_cases import (
    CASES,
    DATABASE_URL,
    FORK_WAYS,
    GRANDCHILD_WAYS,
    HOSTILE,
    NATIVE,
    REPO,
    SECRET,
    SIGNALS,
    SOCKET,
    SUITE,
    THREAD_LIMIT,
    assert_clear,
    assert_layers,
    assert_no_secret,
    assert_refused,
    assert_scores_as_ce,
    attack,
    cases_of,
    kernel_answers,
    needs_kernel,
    needs_namespaces,
    needs_pids_cgroup,
    started_count,
)
from tests.sandbox.hostile_corpus import Run, children_of, processes_touching

# --- network -------------------------------------------------------------------------------------


@attack("socket_connect_tcp")
def test_tcp_to_localhost_is_a_violation(corpus):
    run = corpus.run("socket_connect_tcp")
    assert_refused(run, SOCKET)
    assert corpus.tcp.got(run.tokens["__HOSTILE_MARKER__"]) == []


@needs_kernel
@attack("kernel_tcp_connect")
def test_kernel_alone_refuses_tcp_to_localhost(corpus):
    run = corpus.run("kernel_tcp_connect")
    assert_clear(run, "failed", "objective", "PermissionError",
                 "[Errno 1] Operation not permitted", "socket.socket(")  # seccomp
    assert corpus.tcp.got(run.tokens["__HOSTILE_MARKER__"]) == []
    assert_layers(run, python_guard=False)


@needs_kernel
@attack("kernel_unix_socket")
def test_kernel_alone_refuses_unix_sockets_outside(corpus):
    run = corpus.run("kernel_unix_socket")
    r = assert_clear(run, "failed", "objective", "PermissionError",
                     "[Errno 1] Operation not permitted", "socket.socket(socket.AF_UNIX")
    assert "connected and sent" not in r.captured
    assert corpus.unix.got(run.tokens["__HOSTILE_MARKER__"]) == []
    assert_layers(run, python_guard=False)


# --- processes and signals -----------------------------------------------------------------------


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


# --- native code ---------------------------------------------------------------------------------


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


# --- the corpus itself, and the worker afterwards ------------------------------------------------


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
