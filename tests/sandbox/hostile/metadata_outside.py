"""Changes the metadata of a file outside the sandbox (a victim the test creates, mode
0600, owned by the test's uid), which Landlock does not cover (it governs reading,
writing, creating and removing files, not their mode, times or extended attributes). One
way per case (``__HOSTILE_PARAM__``):

- ``setxattr``: os.setxattr(victim, "user.hostile", ...), an audit event the guard does
  not check;
- ``chmod``: os.chmod(victim, 0o666), which the guard checks;
- ``chmod_past_the_guard``: the same, and os.utime to the epoch, with builtins.any
  rebound so that the guard's path check passes (see guard_rebind);
- ``fd_in_read_root``: a second victim the test puts inside a read root (the suites
  package): opens it read-only (allowed) and changes it through the descriptor -
  os.fchmod, os.utime and os.setxattr on an fd, which the guard skips (it checks paths
  only) - as it could /dev/zero, the interpreter or the harness's own source.

Then trains normally.

Expected: the victim's mode, times and extended attributes are unchanged; an attempt is
refused (the guard: ``killed``/``violation``, or the kernel: EPERM/EACCES).
"""

import builtins
import os

import torch.nn.functional as F

VICTIM = "__HOSTILE_OWN_VICTIM__"
WAY = "__HOSTILE_PARAM__"
READABLE_VICTIM = "__HOSTILE_READABLE_VICTIM__" if WAY == "fd_in_read_root" else ""


def _chmod():
    os.chmod(VICTIM, 0o666)
    if WAY == "chmod_past_the_guard":
        os.utime(VICTIM, (0, 0))


def _past_the_guard():
    saved = builtins.any
    builtins.any = lambda iterable: True
    try:
        _chmod()
    finally:
        builtins.any = saved


def _through_a_descriptor():
    fd = os.open(READABLE_VICTIM, os.O_RDONLY)
    os.fchmod(fd, 0o666)
    os.utime(fd, (0, 0))
    os.setxattr(fd, "user.hostile", b"__HOSTILE_MARKER__")


attempt = {"setxattr": lambda: os.setxattr(VICTIM, "user.hostile", b"__HOSTILE_MARKER__"),
           "chmod": _chmod, "chmod_past_the_guard": _past_the_guard,
           "fd_in_read_root": _through_a_descriptor}[WAY]
try:
    attempt()
    print(f"{WAY}: changed {READABLE_VICTIM or VICTIM}", flush=True)
except OSError as exc:
    print(f"{WAY}: refused: {type(exc).__name__}: {exc}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
