"""Django's admin at ``/admin/`` for staff users (issue 35, staff tools).

Users are Django's own pages. An objective's description, paper link and visibility may be
edited (its page is rebuilt when they change); everything the boards' numbers are
computed from (versions and their code, cells, metrics, curves, uploads) is shown
read-only: an edit there would make a stored number disagree with the code that produced
it. Nothing here deletes results.
"""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from harness.storage.models import (
    ApiToken,
    Cell,
    ModerationAction,
    Objective,
    ObjectiveVersion,
    Submission,
    Upload,
)


class ReadOnly(admin.ModelAdmin):
    """Viewable by staff, never added, changed or deleted through the admin."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Objective)
class ObjectiveAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "owner", "visibility", "is_builtin")
    list_filter = ("visibility", "is_builtin")
    search_fields = ("slug", "name", "owner__username")
    fields = ("slug", "owner", "is_builtin", "name", "description", "paper_url", "visibility")
    # the name is on the cached boards, which are rebuilt when cells change, not when an
    # objective is edited; description, paper link and visibility are on its own page only
    readonly_fields = ("slug", "owner", "is_builtin", "name")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # Django 6's default

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # objectives come from submissions and the engine

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ObjectiveVersion)
class VersionAdmin(ReadOnly):
    list_display = ("label", "objective", "created", "key")
    search_fields = ("label", "objective__slug", "key")


@admin.register(Submission)
class SubmissionAdmin(ReadOnly):
    list_display = ("pk", "owner", "version", "suites", "seeds", "created")
    search_fields = ("owner__username", "version__objective__slug")
    exclude = ("cells",)  # thousands of rows in a select box


@admin.register(Cell)
class CellAdmin(ReadOnly):
    list_display = ("pk", "version", "suite", "variant", "seed", "status", "reason",
                    "attempts", "worker", "finished_at")
    list_filter = ("status", "reason", "suite")
    search_fields = ("version__objective__slug", "variant", "worker")
    list_select_related = ("version",)


@admin.register(Upload)
class UploadAdmin(ReadOnly):
    list_display = ("pk", "version", "suite", "status", "reason", "created")
    list_filter = ("status", "suite")


@admin.register(ApiToken)
class TokenAdmin(ReadOnly):
    """Who holds which token (its first characters; the token itself is never stored)."""

    list_display = ("user", "name", "prefix", "created", "last_used", "revoked")
    search_fields = ("user__username", "name", "prefix")
    exclude = ("digest",)


@admin.register(ModerationAction)
class ModerationAdmin(ReadOnly):
    """Every cancel and requeue: who, when, why (webapp/moderation.py)."""

    list_display = ("created", "actor", "action", "submission", "cells", "reason")
    list_filter = ("action",)
    search_fields = ("actor__username", "reason")
