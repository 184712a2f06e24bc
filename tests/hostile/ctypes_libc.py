"""Calls into libc and the CPython API through ctypes: dlopen libc.so.6 for system() and
getpid(), dlopen the main program, PyRun_SimpleString through ctypes.pythonapi, and the
sandbox's own landlock helper.

Expected: loading or calling native code is refused: ``killed``/``violation``.
"""

import ctypes

import torch.nn.functional as F

from harness import landlock

attempts = [
    lambda: ctypes.CDLL("libc.so.6").system(b"touch /tmp/harness-ctypes-escape"),
    lambda: ctypes.CDLL(None).getpid(),
    lambda: ctypes.pythonapi.PyRun_SimpleString(b"print('native')"),
    lambda: landlock._libc().getpid(),
]
errors = []
for attempt in attempts:
    try:
        print("native call returned", attempt())
    except Exception as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
