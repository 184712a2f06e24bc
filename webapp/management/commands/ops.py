"""``python manage.py ops``: the staff page /ops/ as text (or ``--json``): workers and
their last heartbeat, queued cells per queue and the oldest one's age, and the last 24
hours' cells by state and failures by reason (webapp/ops.py)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from webapp.ops import lines, snapshot


class Command(BaseCommand):
    help = "Workers, queues and the last 24 hours' cells, as /ops/ shows them."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON object")

    def handle(self, *args, **options):
        snap = snapshot()
        if options.get("json"):
            self.stdout.write(json.dumps(snap, indent=1))
            return
        for line in lines(snap):
            self.stdout.write(line)
