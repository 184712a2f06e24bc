"""Segfaults by reading a string at address 0 with ctypes.string_at inside the loss (with a
size, string_at(0, n) would not even touch the address: it makes uninitialised bytes).

Expected: ``failed``, reason ``crash`` (died of SIGSEGV): ctypes.string_at raises no
event the guard refuses (its audit event is "ctypes.string_at").
"""

import ctypes


def classification_loss(logits, targets):
    return ctypes.string_at(0)
