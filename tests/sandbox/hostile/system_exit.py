"""Raises SystemExit(0) from inside the loss, hoping to end the child "successfully".

Expected: ``failed``, reason ``objective``; the error names SystemExit.
"""


def classification_loss(logits, targets):
    raise SystemExit(0)
