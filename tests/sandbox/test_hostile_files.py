"""Hostile objectives that go for files and secrets outside their work directory: the
machine's files, the web app's settings and database URL, the worker's environment, other
cells' work directories, writes, renames, links and metadata changes outside, special
files (docs/sandbox.md: the minimal root, Landlock, the tmpfs work directory, a scrubbed
environment, the guard's file allow-list). Each attack is a file in tests/sandbox/hostile/,
run as hostile_cases.py describes; the @kernel cases run with the guard off, to show the
kernel layers refuse on their own.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path

import pytest

from tests.sandbox.hostile_cases import (
    CASES,
    IMPORTS,
    LANDLOCK,
    NAMESPACES,
    NO_FILE,
    NO_WRITE,
    RENAMES,
    REPO,
    WRITES,
    assert_clear,
    assert_layers,
    assert_no_secret,
    assert_not_importable,
    assert_refused,
    assert_scores_as_ce,
    attack,
    cases_of,
    fill,
    needs_kernel,
)

# --- secrets outside -----------------------------------------------------------------------------


@attack("read_etc_passwd")
def test_reading_etc_passwd_is_a_violation(corpus):
    run = corpus.run("read_etc_passwd")
    assert_refused(run, "reading /etc/passwd")
    assert "root:x:0:0" not in run.text


@needs_kernel
@attack("kernel_read_passwd")
def test_kernel_alone_refuses_reading_etc_passwd(corpus):
    run = corpus.run("kernel_read_passwd")
    # the minimal root has no /etc/passwd (ENOENT); Landlock would refuse it anyway (EACCES)
    r = assert_clear(run, "failed", "objective", "'/etc/passwd'")
    assert re.search(r"\[Errno (2|13)\]", r.error), r.error
    assert "root:x:0:0" not in run.text
    assert_layers(run, python_guard=False)


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


# --- writing outside -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases_of("write_outside"))
def test_writing_outside_the_work_directory_is_a_violation(corpus, case):
    run = corpus.run(case)
    target = fill(WRITES[CASES[case].param], run)
    assert_refused(run, f"writing {target}")
    assert not Path(target).exists(), f"{target} was written from inside the sandbox"


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


@needs_kernel
@attack("kernel_symlink_outputs")
def test_kernel_alone_keeps_symlinked_outputs_harmless(corpus):
    run = corpus.run("kernel_symlink_outputs")
    # a loss server writes no report and the worker reads nothing from its work directory
    assert_scores_as_ce(run, corpus)
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
