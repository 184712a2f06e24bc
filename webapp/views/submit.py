"""Submitting an objective and watching its cells run.

The form does every check and creates the cells; the runner executes them; these
views only connect the two to requests.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_safe

from webapp.execution.status import run_state
from webapp.forms import SubmissionForm
from webapp.models import Submission


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    form = SubmissionForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        submission = form.save()
        if submission is not None:
            for warning in form.warnings:
                messages.warning(request, warning)
            return redirect("run-status", pk=submission.pk)
    return render(request, "webapp/submit.html", {"form": form})


@require_safe
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    state = run_state(_submission(pk), request.user)
    return render(request, "webapp/run_status.html", {"run": state})


@require_safe
def run_status_json(request: HttpRequest, pk: int) -> JsonResponse:
    response = JsonResponse(run_state(_submission(pk), request.user))
    response["Cache-Control"] = "no-store"
    return response


def _submission(pk: int) -> Submission:
    return get_object_or_404(Submission.objects.select_related("version__objective"), pk=pk)
