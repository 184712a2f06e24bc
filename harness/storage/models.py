"""Result storage: objective → version → cell → metrics and curves.

A cell is (objective version, suite, suite version, variant, seed): the unit of
work, of storage and of retry. The unique constraint makes a rerun store one row.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from harness.contract.suite import REASONS


class Objective(models.Model):
    PUBLIC, PRIVATE = "public", "private"

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    paper_url = models.URLField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="objectives")
    is_builtin = models.BooleanField(default=False)
    # hidden by staff from every board, export and list (webapp/moderation.py); its owner
    # still sees it, with the reason
    hidden_at = models.DateTimeField(null=True, blank=True)
    hidden_reason = models.TextField(blank=True)
    visibility = models.CharField(max_length=10, default=PUBLIC,
                                  choices=[(PUBLIC, "public"), (PRIVATE, "private")])
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class ObjectiveVersion(models.Model):
    """One exact code text plus one set of hyperparameters."""

    objective = models.ForeignKey(Objective, on_delete=models.CASCADE, related_name="versions")
    code = models.TextField()
    code_sha256 = models.CharField(max_length=64)
    hyperparameters = models.JSONField(default=dict)
    # sha256 over code hash and canonical hyperparameters: the version's identity.
    key = models.CharField(max_length=64)
    label = models.CharField(max_length=300)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["objective", "key"],
                                               name="unique_version_key")]

    def __str__(self) -> str:
        return self.label


class Cell(models.Model):
    """queued → running → ok | diverged | failed | timeout | killed.

    ``reason`` (a key of :data:`harness.contract.suite.REASONS`) says why a cell ended
    failed, timeout or killed; ``error`` and ``captured`` (the sandboxed child's stdout/stderr) can
    quote the objective's code and are shown to its owner only. While a worker holds a
    cell, ``worker`` names it and ``heartbeat_at`` is refreshed; ``attempts`` counts claims
    and fences writes (a worker stores a cell only while the attempt it claimed is current).
    """

    QUEUED, RUNNING, OK, DIVERGED, FAILED, TIMEOUT, KILLED = (
        "queued", "running", "ok", "diverged", "failed", "timeout", "killed")
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, OK, DIVERGED, FAILED, TIMEOUT, KILLED)]
    FINISHED = (OK, DIVERGED, FAILED, TIMEOUT, KILLED)
    FAILURES = (FAILED, TIMEOUT, KILLED)  # finished without a result: a resubmission reruns them
    REASON_CHOICES = [(k, k) for k in REASONS]

    version = models.ForeignKey(ObjectiveVersion, on_delete=models.CASCADE, related_name="cells")
    suite = models.CharField(max_length=50)
    suite_version = models.CharField(max_length=20)
    variant = models.CharField(max_length=100)
    variant_hash = models.CharField(max_length=64)
    seed = models.IntegerField()
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    attempts = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    diverged_step = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    wall_time = models.FloatField(null=True, blank=True)
    environment = models.JSONField(default=dict)
    reason = models.CharField(max_length=20, blank=True, choices=REASON_CHOICES)
    captured = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # share of the training of the group this cell trains in (0–1), written with the
    # heartbeat; None when the suite reports none or the cell is not running
    progress = models.FloatField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["version", "suite", "suite_version", "variant", "seed"], name="unique_cell")]
        indexes = [models.Index(fields=["suite", "suite_version", "variant"]),
                   models.Index(fields=["status", "heartbeat_at"], name="cell_status_heartbeat")]

    def __str__(self) -> str:
        return f"{self.version} {self.suite}/{self.variant} seed {self.seed}"


class Metric(models.Model):
    cell = models.ForeignKey(Cell, on_delete=models.CASCADE, related_name="metrics")
    name = models.CharField(max_length=100)
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cell", "name"], name="unique_metric")]


class Curve(models.Model):
    cell = models.ForeignKey(Cell, on_delete=models.CASCADE, related_name="curves")
    name = models.CharField(max_length=100)
    values = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cell", "name"], name="unique_curve")]


class CellTally(models.Model):
    """Finished cells per (suite version, variant, objective version) and a counter of their
    changes, kept by database triggers on the cell table (migration 0008), so that every
    write path (the ORM, bulk updates, deletes, COPY) keeps it exact.

    ``finished`` counts cells in a :attr:`Cell.FINISHED` status; ``changes`` grows by one
    whenever such a cell is stored, changed, deleted or leaves a finished status, and never
    goes back: ``(sum(finished), sum(changes))`` over some tallies is a change signal for
    the results they cover that costs a few rows to read instead of an aggregate over the
    cells. ``version_id`` is a plain integer: a tally outlives a deleted version (its
    ``finished`` drops to 0) so its counter keeps growing if the row is ever reused.
    """

    suite = models.CharField(max_length=50)
    suite_version = models.CharField(max_length=20)
    variant = models.CharField(max_length=100)
    version_id = models.IntegerField()
    finished = models.IntegerField(default=0)
    changes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["suite", "suite_version", "variant", "version_id"], name="unique_cell_tally")]


class FactorialCell(models.Model):
    """A cell of a factorial run (``harness run --factorial``): the seed streams at one
    level each (``harness.contract.seeding.factorial_seed``). Not a replicate seed, so on no
    results table; :mod:`harness.report.variance` splits the variance of a full grid of them."""

    version = models.ForeignKey(ObjectiveVersion, on_delete=models.CASCADE,
                                related_name="factorial_cells")
    suite = models.CharField(max_length=50)
    suite_version = models.CharField(max_length=20)
    variant = models.CharField(max_length=100)
    variant_hash = models.CharField(max_length=64)
    init = models.IntegerField()
    order = models.IntegerField()
    noise = models.IntegerField()
    status = models.CharField(max_length=10, choices=Cell.STATUSES)
    metrics = models.JSONField(default=dict)  # finite values only
    environment = models.JSONField(default=dict)
    wall_time = models.FloatField(null=True, blank=True)
    finished_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["version", "suite", "suite_version", "variant", "init", "order", "noise"],
            name="unique_factorial_cell")]
        indexes = [models.Index(fields=["suite", "suite_version", "variant"],
                                name="factorial_suite_variant")]


class Submission(models.Model):
    """A web submission: who asked for which suites, and the cells it queued."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="submissions")
    version = models.ForeignKey(ObjectiveVersion, on_delete=models.CASCADE,
                                related_name="submissions")
    suites = models.JSONField(default=list)
    seeds = models.IntegerField(default=5)
    cells = models.ManyToManyField(Cell, related_name="submissions")
    created = models.DateTimeField(auto_now_add=True)


class ModerationAction(models.Model):
    """What an owner or staff did to a run (cancel it, requeue its failed cells) or staff to
    an objective (hide it, show it again), by whom, when and why: the record the run page,
    the objective page and the admin show (webapp/moderation.py)."""

    CANCEL, REQUEUE, HIDE, UNHIDE = "cancel", "requeue", "hide", "unhide"
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                              related_name="moderation_actions")
    action = models.CharField(max_length=20, choices=[(a, a) for a in (CANCEL, REQUEUE, HIDE,
                                                                        UNHIDE)])
    submission = models.ForeignKey(Submission, null=True, on_delete=models.CASCADE,
                                   related_name="moderation")
    objective = models.ForeignKey(Objective, null=True, on_delete=models.CASCADE,
                                  related_name="moderation")
    reason = models.TextField(blank=True)
    cells = models.IntegerField(default=0)  # how many cells it changed
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]


class TableCache(models.Model):
    """A computed leaderboard table, valid while its fingerprint (count and newest
    finish time of the cells it was built from) is unchanged: pages read one row."""

    key = models.CharField(max_length=300, unique=True)
    fingerprint = models.CharField(max_length=200)
    payload = models.JSONField()
    updated = models.DateTimeField(auto_now=True)


class ApiToken(models.Model):
    """A user's key for ``harness submit`` (the API's write endpoints).

    Only the token's sha256 is stored: the token itself is shown once, when it is made. A
    token is 256 random bits, so a plain hash is enough (no password-style stretching: it
    cannot be guessed from a word list). Revoking keeps the row (the account page lists it)
    and refuses it from then on.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)  # its first characters, to tell tokens apart
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"


class Upload(models.Model):
    """Local results a user uploaded (``harness submit``) and their verification.

    The claimed numbers stay in :class:`UploadedCell`, apart from the server's cells; the
    server re-runs a sample of them (``sample``, a submission of its own) and compares.
    pending → verified | mismatch | unverifiable. Only a verified upload's cells join the
    version's results (and so the public tables).
    """

    PENDING, VERIFIED, MISMATCH, UNVERIFIABLE = "pending", "verified", "mismatch", "unverifiable"
    STATUSES = [(s, s) for s in (PENDING, VERIFIED, MISMATCH, UNVERIFIABLE)]

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="uploads")
    version = models.ForeignKey(ObjectiveVersion, on_delete=models.CASCADE,
                                related_name="uploads")
    suite = models.CharField(max_length=50)
    suite_version = models.CharField(max_length=20)
    status = models.CharField(max_length=12, choices=STATUSES, default=PENDING)
    # why it is unverifiable, in words; empty otherwise
    reason = models.TextField(blank=True)
    # [{"variant", "seed", "metric", "local", "server"}]: every value that differs
    differences = models.JSONField(default=list)
    sample = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="uploads")
    created = models.DateTimeField(auto_now_add=True)
    checked = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"upload {self.pk} of {self.version} ({self.status})"


class UploadedCell(models.Model):
    """One cell as the uploader's machine computed it: the claim, never a result by itself."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="claimed")
    variant = models.CharField(max_length=100)
    seed = models.IntegerField()
    status = models.CharField(max_length=10, choices=[(Cell.OK, Cell.OK),
                                                      (Cell.DIVERGED, Cell.DIVERGED)])
    diverged_step = models.IntegerField(null=True, blank=True)
    wall_time = models.FloatField(null=True, blank=True)
    metrics = models.JSONField(default=dict)
    curves = models.JSONField(default=dict)
    environment = models.JSONField(default=dict)
    sampled = models.BooleanField(default=False)  # the server re-runs this one

    class Meta:
        constraints = [models.UniqueConstraint(fields=["upload", "variant", "seed"],
                                               name="unique_uploaded_cell")]
