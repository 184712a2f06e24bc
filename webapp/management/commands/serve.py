"""``python manage.py serve [--with-worker]``: the web app, and optionally a local worker,
in one command — a whole server on a laptop, with no Redis and no other service.

``--with-worker`` starts ``celery -A tasks worker --queues cpu,gpu`` beside the web server
and points the web app at it (``HARNESS_EXECUTOR=tasks.dispatch:enqueue``). The broker is
``HARNESS_BROKER_URL`` when set, else the embedded one (files in the data directory).
The database is the configured one (default: SQLite in the data directory). Ctrl-C stops
both. Without ``--with-worker`` the web app runs submissions with its configured executor
(default: a thread in the web process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

CELERY_EXECUTOR = "tasks.dispatch:enqueue"


class Command(BaseCommand):
    help = ("Serve the web app; with --with-worker also a local Celery worker on the cpu and "
            "gpu queues (embedded broker unless HARNESS_BROKER_URL is set). Ctrl-C stops both.")

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000",
                            help="address and port to serve on (default 127.0.0.1:8000)")
        parser.add_argument("--with-worker", action="store_true",
                            help="also run a Celery worker here and send submissions to it")
        parser.add_argument("--concurrency", type=int, default=1,
                            help="worker processes training at once (default 1)")
        parser.add_argument("--queues", default="cpu,gpu",
                            help="queues the local worker takes (default cpu,gpu)")
        parser.add_argument("--gunicorn", action="store_true",
                            help="serve with gunicorn instead of Django's development server")
        parser.add_argument("--no-migrate", action="store_true",
                            help="do not apply migrations first")

    def handle(self, *args, addrport: str, with_worker: bool, concurrency: int, queues: str,
               gunicorn: bool, no_migrate: bool, **options):
        signal.signal(signal.SIGTERM, _interrupt)  # `kill`, `docker stop`: stop both cleanly
        if not no_migrate:
            call_command("migrate", verbosity=0, interactive=False)
        env = dict(os.environ)
        processes: list[tuple[str, subprocess.Popen]] = []
        if with_worker:
            env["HARNESS_EXECUTOR"] = CELERY_EXECUTOR
            env.setdefault("C_FORCE_ROOT", "1")  # containers and CI run as root
            processes.append(("worker", subprocess.Popen(
                worker_command(queues, concurrency), env=env)))
            broker = settings.HARNESS_BROKER_URL or f"embedded ({settings.BROKER_DIR})"
            self.stdout.write(f"worker: queues {queues}, concurrency {concurrency}, "
                              f"broker {broker}")
        processes.append(("web", subprocess.Popen(web_command(addrport, gunicorn), env=env)))
        self.stdout.write(f"web: http://{addrport}/  (Ctrl-C stops everything)")
        return_code = supervise(processes)
        if return_code:
            sys.exit(return_code)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def worker_command(queues: str, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--queues", queues,
            "--concurrency", str(concurrency), "--hostname", "local@%h", "--loglevel", "INFO"]


def web_command(addrport: str, gunicorn: bool) -> list[str]:
    if gunicorn:
        return [sys.executable, "-m", "gunicorn", "webapp.wsgi:application", "--bind",
                addrport, "--workers", "2"]
    manage = settings.BASE_DIR / "manage.py"
    return [sys.executable, str(manage), "runserver", addrport, "--noreload"]


def supervise(processes: list[tuple[str, subprocess.Popen]]) -> int:
    """Wait until one process ends or Ctrl-C; then stop the others (TERM, then KILL)."""
    code = 0
    try:
        while True:
            for name, process in processes:
                if process.poll() is not None:
                    code = process.returncode
                    print(f"serve: {name} exited with status {code}", file=sys.stderr)
                    raise StopIteration
            time.sleep(0.5)
    except (KeyboardInterrupt, StopIteration):
        pass
    for _, process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for _, process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
    return code
