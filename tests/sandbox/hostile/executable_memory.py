"""Makes memory it could write machine code into and run, from inside the loss (while the
server answers hook calls, torch loaded): an anonymous read-write-execute mapping, an
anonymous read-execute one, and ``mprotect`` of one of its own pages to read-execute
(through ctypes). It would then copy code there; it swallows nothing: the first error
ends the call.

Expected: with the guard, ``mmap`` is refused and ends the server
(``killed``/``violation``: mapping files into memory). Without it (@kernel), seccomp's
W^X rule refuses every attempt with EPERM: ``failed``/``objective``, "Operation not
permitted", and each attempt printed as refused.
"""

import ctypes
import mmap

import torch.nn.functional as F

RW, EXEC = mmap.PROT_READ | mmap.PROT_WRITE, mmap.PROT_EXEC


def _mprotect():
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=RW)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    if libc.mprotect(ctypes.c_void_p(address), mmap.PAGESIZE, mmap.PROT_READ | EXEC):
        number = ctypes.get_errno()
        raise OSError(number, "mprotect to PROT_EXEC refused")
    return address


ATTEMPTS = {"anonymous rwx": lambda: mmap.mmap(-1, mmap.PAGESIZE, prot=RW | EXEC),
            "anonymous rx": lambda: mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | EXEC),
            "mprotect rx": _mprotect}


def classification_loss(logits, targets):
    errors = []
    for name, attempt in ATTEMPTS.items():
        try:
            print(f"{name}: mapped {attempt()}", flush=True)
        except OSError as exc:
            print(f"{name}: refused [Errno {exc.errno}]", flush=True)
            errors.append(exc)
    if errors:
        raise errors[0]
    return F.cross_entropy(logits, targets, reduction="none")
