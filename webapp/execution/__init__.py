"""Running a submission's cells, off the request (the web app's side of the workers).

- :mod:`~webapp.execution.executors`: ``enqueue(submission)``, the one seam between the web
  app and whatever executes cells (``settings.HARNESS_EXECUTOR``);
- :mod:`~webapp.execution.groups`: cells trained together, and one worker's go at them
  (claim, train with a heartbeat, store, fenced by the claim);
- :mod:`~webapp.execution.heartbeat`: keeping a claim alive while its cells train;
- :mod:`~webapp.execution.database`: surviving database restarts (retries, reconnects);
- :mod:`~webapp.execution.placement`: which device and how many threads a group gets;
- :mod:`~webapp.execution.status`: what the run status page and ``status.json`` show.

Built-in baselines train in the worker's process; a submitted objective only ever trains
through :func:`harness.runner.sandboxed.run_cells_sandboxed`, never here.
"""
