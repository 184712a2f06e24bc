"""Hostile objectives that tamper with the harness inside their own interpreter: swallow a
refusal and retry, clear the guard's table, rebind what it calls, change a path's answer
between two looks, choose their own exit status, hide or hold back the guard's report,
walk the inherited heap, or switch the guard off through raw memory (docs/sandbox.md: the
Python audit hook and its report pipe; it is an early error, not a wall, so where it is
switched off the kernel layers must hold). Each attack is a file in
tests/sandbox/hostile/, run as hostile_cases.py describes.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.sandbox.hostile_cases import (
    CASES,
    NO_FILE,
    NO_WRITE,
    REBIND_CLOSED,
    REBOUND,
    REPORT_HIDDEN,
    SWALLOWED,
    TAMPERED,
    assert_clear,
    assert_layers,
    assert_no_secret,
    assert_refused,
    assert_scores_as_ce,
    attack,
    cases_of,
    fill,
    kernel_answers,
    needs_kernel,
)
from tests.sandbox.hostile_corpus import Run

# --- a refusal ends the child --------------------------------------------------------------------


@pytest.mark.parametrize("case", cases_of("swallow_and_retry"))
def test_a_refusal_cannot_be_swallowed(corpus, case):
    run = corpus.run(case)
    r = assert_refused(run, fill(SWALLOWED[CASES[case].param], run))
    assert "still training after the attempt" not in r.captured  # not even one step more
    assert not Path(run.tokens["__HOSTILE_ESCAPE__"]).exists()


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


# --- the guard's state and helpers ---------------------------------------------------------------


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
    if CASES[case].param == "len":  # were the hook to raise instead of ending the child
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


# --- the guard's report --------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases_of("hide_violations"))
def test_a_violation_whose_report_is_hidden_is_still_reported(corpus, case):
    # the guard's exit status says what happened, not what it was
    r = assert_clear(corpus.run(case), "killed", "violation")
    assert r.error == REPORT_HIDDEN, r.error
    assert "still running after the refusal" not in r.captured and not r.metrics


@pytest.mark.parametrize("case", cases_of("hide_violations_stderr"))
def test_violations_hidden_from_stderr_are_still_reported(corpus, case):
    r = assert_refused(corpus.run(case), "reading /etc/passwd")
    assert "read refused" not in r.captured and "root:x:0:0" not in r.captured


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


# --- introspection and raw memory ----------------------------------------------------------------


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


@needs_kernel
@attack("inherited_shared_pages")
def test_no_job_shares_a_writable_page_with_another(corpus):
    """The fork server's tqdm lock was a semaphore in a shared page that every job mapped:
    a channel between objectives and a lock one of them could hold against all."""
    run = corpus.run("inherited_shared_pages")
    r = assert_scores_as_ce(run, corpus)
    assert "shared_writable=0" in r.captured, r.captured


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
