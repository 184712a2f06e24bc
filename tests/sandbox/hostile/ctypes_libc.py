"""Calls into native code through ctypes, one way per case (``__HOSTILE_PARAM__``): dlopen
libc.so.6 for system(), dlopen the main program for getpid(), PyRun_SimpleString through
ctypes.pythonapi (already loaded), and the sandbox's own landlock helper's libc handle.

Expected: loading or calling native code is refused and ends the child:
``killed``/``violation`` (ctypes.dlopen, ctypes.dlsym); nothing runs.
"""

import ctypes

import torch.nn.functional as F

from harness.sandbox import landlock

attempt = {
    "libc_system": lambda: ctypes.CDLL("libc.so.6").system(b"touch /tmp/harness-ctypes-escape"),
    "main_program": lambda: ctypes.CDLL(None).getpid(),
    "pythonapi": lambda: ctypes.pythonapi.PyRun_SimpleString(b"print('native')"),
    "landlock_libc": lambda: landlock._libc().getpid(),
}["__HOSTILE_PARAM__"]
print("native call returned", attempt(), flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
