"""``python manage.py populate_baselines``: run the built-in baselines so a fresh install
shows a populated leaderboard.

With ``--queue`` the cells go to the Celery workers instead (webapp/bootstrap.py) and the
command returns at once (tasks/bootstrap.py); the image's web entry point does that on an
empty database.

An operator's entry point on the client's Python API (:func:`harness.api.run`, what
``harness run suite`` calls): cells are trained seed-batched, judged by the suite and
stored through :mod:`harness.storage.store` in the web app's database; cells already
stored are skipped, so rerunning it only fills gaps.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from harness.contract.registry import get_suite, suite_names


class Command(BaseCommand):
    help = "Run the built-in baselines on the suites (skipping stored cells)."

    def add_arguments(self, parser):
        parser.add_argument("--suite", action="append", choices=suite_names(),
                            help="suite to run (repeatable; default: every suite)")
        parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
        parser.add_argument("--variants", nargs="+", metavar="V",
                            help="variants (default: each suite's public set)")
        parser.add_argument("--objective", "-o", action="append", metavar="NAME",
                            help="only these built-in objectives (repeatable; default: all)")
        parser.add_argument("--epochs", type=int, help="shorten training (a smoke run, stored "
                            "as suite version V+eN, which the pages do not show)")
        parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
        parser.add_argument("--queue", action="store_true",
                            help="queue the cells on the Celery workers and return (the "
                                 "board fills as they finish) instead of training here")
        parser.add_argument("--if-empty", action="store_true",
                            help="do nothing when any cell is stored (the image's first start)")

    def handle(self, *args, suite=None, seeds=5, variants=None, objective=None, epochs=None,
               device="cpu", queue=False, if_empty=False, **options):
        from harness import api
        from harness.storage.models import Cell

        if if_empty and Cell.objects.exists():
            self.stdout.write("cells are stored already: nothing to populate")
            return
        if queue:
            return self._queue(suite or suite_names(), objective, variants, seeds, epochs)

        for name in suite or suite_names():
            spec = get_suite(name)
            chosen = None
            if variants:
                chosen = [v for v in variants if v in {x.name for x in spec.variants}]
                if not chosen:
                    self.stdout.write(f"{name}: none of {', '.join(variants)} is a variant; "
                                      "skipped")
                    continue
            if epochs:
                self.stdout.write(self.style.WARNING(
                    f"{name}: --epochs {epochs} stores results as version "
                    f"{spec.shortened(epochs).version}; the leaderboard shows v{spec.version}"))
            self.stdout.write(f"{name}: {', '.join(objective or spec.baselines)} on "
                              f"{', '.join(chosen or spec.default_variants)}, {seeds} seeds")
            try:
                api.run(name, list(objective) if objective else None, variants=chosen,
                        seeds=seeds, epochs=epochs, device=device,
                        say=lambda line: self.stdout.write(line))
            except (api.HarnessError, api.ObjectiveError) as exc:
                raise CommandError(f"{name}: {exc}") from exc
            except api.Interrupted as exc:
                raise CommandError(f"{name}: interrupted; finished groups are stored") from exc
        self.stdout.write(self.style.SUCCESS(
            "smoke results stored (not shown on the leaderboard)" if epochs else
            "baselines stored: the leaderboard shows them"))

    def _queue(self, suites, objectives, variants, seeds, epochs) -> None:
        from django.conf import settings

        from tasks.bootstrap import queue_baselines

        if epochs:
            raise CommandError("--queue runs the suites' protocols: --epochs is for a smoke "
                               "run trained here (drop --queue)")
        if settings.HARNESS_EXECUTOR != "tasks.dispatch:enqueue":
            raise CommandError(
                f"--queue sends cells to Celery workers, and this server's executor is "
                f"{settings.HARNESS_EXECUTOR!r}: set HARNESS_EXECUTOR=tasks.dispatch:enqueue "
                f"(the compose stack does), or run without --queue to train here")
        done = queue_baselines(list(suites), list(objectives) if objectives else None,
                               variants, seeds)
        self.stdout.write(self.style.SUCCESS(
            f"{done.cells} baseline cells queued ({done.messages} groups sent to the "
            f"workers); the home page counts them down as they finish"))
