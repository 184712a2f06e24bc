"""Gives the guard a different path than the kernel, without rebinding anything:
io.FileIO (unlike open() and os.open) hands the audit hook the caller's path object
itself, after converting it once for the system call, so an os.PathLike whose
__fspath__ answers /etc/passwd the first time and the work directory afterwards is
checked as the work directory and opened as /etc/passwd. Swallows the error; trains.

Expected: Landlock refuses the read (EACCES) and the attempt is reported as a violation
naming /etc/passwd (``killed``/``violation``).
"""

import io
import os

import torch.nn.functional as F

WORKDIR = os.getcwd()


class Flip:
    calls = 0

    def __fspath__(self):
        Flip.calls += 1
        return "/etc/passwd" if Flip.calls == 1 else WORKDIR


try:
    with io.FileIO(Flip()) as f:
        print("read /etc/passwd:", f.read(20), flush=True)
except OSError as exc:
    print(f"FileIO: {type(exc).__name__}: [Errno {exc.errno}] {exc.strerror}; "
          f"__fspath__ called {Flip.calls} times", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
