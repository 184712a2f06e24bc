"""The Celery app: ``celery -A tasks worker --queues cpu`` (or ``gpu``, or ``cpu,gpu``).

Configuration comes from Django settings (``CELERY_*`` and ``HARNESS_*`` in
webapp/settings.py, themselves from the environment); the database is the Django one
(``DATABASE_URL``), which is also where results go: no result backend.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from celery import Celery  # noqa: E402
from celery.signals import setup_logging  # noqa: E402
from django.conf import settings  # noqa: E402
from kombu import Exchange, Queue  # noqa: E402

QUEUES = ("cpu", "gpu")


def config() -> dict:
    """Celery settings: reliable delivery (late acks, one message per process at a time)."""
    from harness.contract.registry import get_suite, suite_names
    from tasks.limits import visibility_timeout

    visibility = visibility_timeout([get_suite(n) for n in suite_names()],
                                    settings.HARNESS_VISIBILITY_TIMEOUT)
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem:"):
        folder = settings.BROKER_DIR
        (folder / "control").mkdir(parents=True, exist_ok=True)
        transport = {"data_folder_in": str(folder), "data_folder_out": str(folder),
                     "control_folder": str(folder / "control"), "polling_interval": 0.2}
    else:
        transport = {
            "visibility_timeout": visibility,
            # How often a worker looks for messages whose worker died (unacknowledged for
            # longer than the visibility timeout); kombu's default sweep is 100 s.
            "unacked_restore_interval": max(1, min(10, int(visibility // 20))),
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": 10,
        }
    return {
        "broker_url": url,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # a restarting broker: keep trying
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 5, "interval_start": 0.2,
                                      "interval_step": 0.5, "interval_max": 3},
        "task_queues": [Queue(name, Exchange(name), routing_key=name) for name in QUEUES],
        "task_default_queue": "cpu",
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,  # results are cells in the database
        "task_acks_late": True,  # a message is acknowledged once its cells are stored
        "task_reject_on_worker_lost": True,  # a killed pool process: the message goes back
        "worker_prefetch_multiplier": 1,  # a worker holds only the message it runs
        # Keep training when the broker connection drops: the cells land in the database
        # anyway, and a redelivered message finds them finished.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "harness_visibility_timeout": visibility,
        # Task events (sent, started, succeeded, failed) for Flower or `celery events` on the
        # same broker; the embedded filesystem broker has no fan-out for them.
        "worker_send_task_events": not url.startswith("filesystem:"),
        "task_send_sent_event": not url.startswith("filesystem:"),
    }


app = Celery("harness", include=["tasks.tasks", "tasks.worker"])
app.conf.update(config())


@setup_logging.connect
def _logging(**_: object) -> None:
    """The web app's logging (webapp/logs.py) instead of Celery's own: stderr, the same
    text or JSON lines (HARNESS_LOG_FORMAT), each worker line with its cells and runs."""
    import logging.config

    logging.config.dictConfig(settings.LOGGING)
