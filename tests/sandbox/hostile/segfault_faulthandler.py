"""Segfaults with faulthandler._sigsegv() inside the loss (no ctypes needed).

Expected: ``failed``, reason ``crash``, the error names SIGSEGV.
"""

import faulthandler


def classification_loss(logits, targets):
    faulthandler._sigsegv()
