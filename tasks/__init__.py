"""Celery app, tasks and queue routing: submitted cells run on any number of workers.

    celery -A tasks worker --queues cpu --concurrency 1 --hostname cpu@%h

The web app sends work with ``HARNESS_EXECUTOR=tasks.dispatch:enqueue``: each group of a
submission's cells (one objective version, suite, variant; several seeds) goes to the
``cpu`` or ``gpu`` queue (:mod:`tasks.dispatch`), a worker runs it with
:func:`tasks.tasks.run_queued_group` (the engine's :func:`harness.runner.group.run_group`
on the cells it claimed) and writes the results to the database. The broker is
``HARNESS_BROKER_URL`` (Redis in production), else an embedded one that needs no server
(``python manage.py serve --with-worker`` runs the web app and a worker together).
A reaper inside every worker (:mod:`tasks.reaper`) queues again the cells of workers
that died; ``python manage.py reap`` runs it once.
"""

from tasks.celery import app

__all__ = ["app"]
