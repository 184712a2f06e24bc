"""Imports, one per case (``__HOSTILE_PARAM__``), the web application's Django settings,
the Celery tasks (tasks.celery: the broker) or django.conf, to read the database
credentials and broker URL the worker runs with.

Expected: webapp/, tasks/ and django are no read roots: the import system's first read
there is refused and ends the child, ``killed``/``violation`` naming a file of that
package; no credential is printed.
"""

import importlib

import torch.nn.functional as F

module = importlib.import_module("__HOSTILE_PARAM__")
print(module.__name__, {k: getattr(module, k) for k in dir(module) if k.isupper()}, flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
