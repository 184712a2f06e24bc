"""Submitting an objective and watching its cells run.

The form does every check and creates the cells; the runner executes them; these
views only connect the two to requests.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from harness.contract.registry import suite_names
from harness.storage.models import Submission
from webapp import moderation
from webapp.execution.status import run_state
from webapp.forms import SubmissionForm


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    data, files = request.POST, request.FILES
    # ?suite=NAME (an empty suite page's link) ticks that suite; unknown names tick none
    asked = [n for n in request.GET.getlist("suite") if n in suite_names()]
    form = SubmissionForm(data or None, files or None, user=request.user,
                          initial={"suites": asked} if asked else None)
    if request.method == "POST" and form.is_valid():
        submission = form.save()
        if submission is not None:
            for warning in form.warnings:
                messages.warning(request, warning)
            return redirect("run-status", pk=submission.pk)
    return render(request, "webapp/submit.html", {"form": form})


def _too_large(request: HttpRequest) -> HttpResponse:
    """A body over DATA_UPLOAD_MAX_MEMORY_SIZE (webapp.middleware answers it before the CSRF
    check would fail on it): the form again, with what the limits are. Under the ceiling a
    paste too long for an objective is parsed, and the form names its size."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    messages.error(request, f"The submission is larger than the server accepts "
                            f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 2 ** 20} MB); an "
                            f"objective's code may be at most "
                            f"{settings.MAX_OBJECTIVE_BYTES // 1024} KB.")
    return render(request, "webapp/submit.html", {"form": SubmissionForm(user=request.user)},
                  status=413)


submit.too_large = _too_large  # type: ignore[attr-defined]


@require_safe
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _submission(pk)
    state = run_state(submission, request.user)
    return render(request, "webapp/run_status.html", {
        "run": state, "actions": submission.moderation.select_related("actor"),
        "can_cancel": moderation.may_cancel(request.user, submission),
        "can_requeue": request.user.is_staff})


@require_POST
@login_required
def cancel_run(request: HttpRequest, pk: int) -> HttpResponse:
    """POST /runs/<pk>/cancel/: the owner or staff stop a run (webapp/moderation.py)."""
    return _moderate(request, pk, moderation.cancel, "Run #{pk} cancelled: {n} cells stopped.")


@require_POST
@login_required
def requeue_run(request: HttpRequest, pk: int) -> HttpResponse:
    """POST /runs/<pk>/requeue/: staff queue a run's failed cells again."""
    return _moderate(request, pk, moderation.requeue, "Run #{pk}: {n} cells queued again.")


def _moderate(request: HttpRequest, pk: int, act, done: str) -> HttpResponse:
    reason = (request.POST.get("reason") or "").strip()[:1000]
    try:
        action = act(_submission(pk), request.user, reason)
    except moderation.NotAllowed as exc:
        return HttpResponseForbidden(str(exc))
    messages.success(request, done.format(pk=pk, n=action.cells))
    return redirect("run-status", pk=pk)


@require_safe
def run_status_json(request: HttpRequest, pk: int) -> JsonResponse:
    response = JsonResponse(run_state(_submission(pk), request.user))
    response["Cache-Control"] = "no-store"
    return response


def _submission(pk: int) -> Submission:
    return get_object_or_404(Submission.objects.select_related("version__objective"), pk=pk)
