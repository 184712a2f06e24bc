"""Running cells: in this process, over one process per core, or with the loss in the
sandbox; the one :func:`run_group` every front door (CLI, Python API, Celery task) calls."""
