"""Django's admin at ``/admin/`` for staff users (issue 35, staff tools).

Users are Django's own pages. An objective's description, paper link and visibility may be
edited (its page is rebuilt when they change); everything the boards' numbers are
computed from (versions and their code, cells, metrics, curves, uploads) is shown
read-only: an edit there would make a stored number disagree with the code that produced
it. Nothing here deletes results.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin

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


class ObjectiveForm(forms.ModelForm):
    """Hiding is a moderation action (webapp/moderation.py): a box and the reason its owner
    will read, recorded when the form is saved."""

    paper_url = forms.URLField(required=False, assume_scheme="https")  # Django 6's default
    hide = forms.BooleanField(required=False, label="Hidden from every board and export")
    why = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                          label="Why (the owner sees it; recorded)")

    class Meta:
        model = Objective
        fields = ("description", "paper_url", "visibility")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["hide"].initial = self.instance.hidden_at is not None
        self.fields["why"].initial = self.instance.hidden_reason

    def clean(self) -> dict:
        data = super().clean()
        if data.get("hide") and self.instance.hidden_at is None:
            if self.instance.is_builtin:
                self.add_error("hide", "A built-in baseline is a reference: it is not hidden.")
            elif not (data.get("why") or "").strip():
                self.add_error("why", "Say why: the owner sees the reason.")
        return data


@admin.register(Objective)
class ObjectiveAdmin(admin.ModelAdmin):
    form = ObjectiveForm
    list_display = ("slug", "name", "owner", "visibility", "is_builtin", "hidden_at")
    list_filter = ("visibility", "is_builtin")
    search_fields = ("slug", "name", "owner__username")
    fields = ("slug", "owner", "is_builtin", "name", "description", "paper_url", "visibility",
              "hide", "why")
    # the name is on the cached boards, which are rebuilt when cells change, not when an
    # objective is edited; description, paper link and visibility are on its own page only
    readonly_fields = ("slug", "owner", "is_builtin", "name")

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # objectives come from submissions and the engine

    def save_model(self, request, obj, form, change) -> None:
        from webapp import moderation

        super().save_model(request, obj, form, change)
        hide, why = form.cleaned_data.get("hide"), form.cleaned_data.get("why") or ""
        if hide and obj.hidden_at is None:
            moderation.hide(obj, request.user, why)
        elif not hide and obj.hidden_at is not None:
            moderation.unhide(obj, request.user, why)

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

    list_display = ("created", "actor", "action", "submission", "objective", "cells",
                    "reason")
    list_filter = ("action",)
    search_fields = ("actor__username", "reason")
