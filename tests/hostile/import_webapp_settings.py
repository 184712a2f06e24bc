"""Imports the web application's Django settings, django.conf and the Celery tasks to read
the database credentials and broker URL the worker runs with (tasks.celery: the broker).

Expected: webapp/, tasks/ and django are no read roots: the imports are refused,
``killed``/``violation``; no credential is printed.
"""

import importlib

import torch.nn.functional as F

errors = []
for name in ("webapp.settings", "webapp.settings_test", "tasks.celery", "django.conf"):
    try:
        module = importlib.import_module(name)
        print(name, {k: getattr(module, k) for k in dir(module) if k.isupper()})
    except Exception as exc:  # try them all, then fail with the first refusal
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
