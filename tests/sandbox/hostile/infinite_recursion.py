"""Recurses without end inside the loss.

Expected: ``failed``, reason ``objective``; the error names RecursionError.
"""


def classification_loss(logits, targets):
    return classification_loss(logits, targets)
