"""``python manage.py reap``: one round of the reaper (workers run it every 30 s anyway).

Running cells whose heartbeat is stale go back to the queue (or fail, out of attempts),
and queued cells whose message was lost are sent again. With the Celery runner
(``HARNESS_EXECUTOR=tasks.dispatch:enqueue``) they are sent to the broker; with the thread
runner their submissions are run again in this process (``--no-send``: neither).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Queue again the running cells whose worker stopped sending heartbeats, and send "
            "again queued cells whose message was lost.")

    def add_arguments(self, parser):
        parser.add_argument("--no-send", action="store_true",
                            help="only requeue in the database; send no message")

    def handle(self, *args, no_send: bool = False, **options):
        from tasks.reaper import reap

        if no_send:
            send = _nothing
        elif settings.HARNESS_EXECUTOR.startswith("tasks."):
            send = None  # Celery dispatch
        else:
            send = _through_runner
        done = reap(send=send)
        self.stdout.write(f"queued again: {len(done['released'])} cell(s); "
                          f"{'to send' if no_send else 'sent'}: {len(done['resent'])} cell(s)")


def _nothing(cells) -> int:
    return 0


def _through_runner(cells) -> int:
    """The configured runner (thread, inline) takes whole submissions: run theirs."""
    from harness.storage.models import Submission
    from webapp.execution import executors

    submissions = Submission.objects.filter(cells__in=cells).distinct()
    for submission in submissions:
        executors.enqueue(submission)
    if settings.HARNESS_EXECUTOR == "thread":
        executors.drain()
    return len(submissions)
