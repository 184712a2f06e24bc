"""Forms: every check a submission must pass lives here, views only call them.

The submission form validates the code with the engine's validator, in the sandbox
(never in the web process), before anything is stored or queued, enforces the limits
(size, UTF-8, per-user queued cells) and, once valid, ``save()`` creates the
objective, its version, the cells and the submission in one transaction, and hands
the submission to the runner on commit.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.template.defaultfilters import filesizeformat
from django.utils.text import slugify

from harness.contract.registry import all_suites, get_suite, suite_names
from harness.contract.suite import Suite
from harness.objectives.loading import LoadedObjective, ObjectiveError, parse_assignments
from harness.report.textsafe import hidden_characters
from harness.runner.group import is_tuned_final
from harness.storage.models import Cell, Objective, ObjectiveVersion, Submission
from webapp.execution import executors
from webapp.execution.groups import code_filename

log = logging.getLogger(__name__)

HYPERPARAMETER_PROBLEMS = ("unknown-hyperparameter", "bad-override")
RETRIED = Cell.FAILURES  # a resubmission runs these cells again


def suites_for(objective: LoadedObjective) -> list[Suite]:
    """The registered suites that can run ``objective`` (its hook, or one they lift)."""
    return [s for s in all_suites() if s.supports(objective.hooks)]


def configured(suite: Suite) -> Suite:
    """The suite as submissions run it: shortened when ``HARNESS_RUN_EPOCHS`` is set."""
    epochs = getattr(settings, "HARNESS_RUN_EPOCHS", None)
    return suite.shortened(epochs) if epochs else suite


def _suite_choices() -> list[tuple[str, str]]:
    choices = []
    for name in suite_names():
        suite = get_suite(name)
        hooks = " or ".join(suite.accepted_hooks)
        choices.append((name, f"{name} — {suite.description} (needs {hooks})"))
    return choices


def _tunable() -> list[str]:
    return [n for n in suite_names() if get_suite(n).tuning is not None]


def _tuned_help() -> str:
    """What the tuned track costs, per suite with a tuned protocol, before anything queues."""
    parts = []
    for name in _tunable():
        t = get_suite(name).tuning
        parts.append(f"{name}: {t.k} trials × {len(t.search_seeds)} search seeds on "
                     f"{t.validation_text}, then the chosen trial on your seeds (with 5 seeds, "
                     f"{t.search_members + 5} trainings per variant against 5: "
                     f"about {(t.search_members + 5) / 5:.0f}× the default run)")
    return ("Besides the defaults, tune the objective's declared SEARCH_SPACE and the "
            "suite's learning rate (and weight decay where the suite tunes it) with the "
            "same budget every objective gets, on the suites with a tuned protocol (the "
            "others run at defaults only). "
            "Cost — " + "; ".join(parts) + ". Results appear on the suites' tuned track.")


def _seeds_help() -> str:
    minimums = sorted({get_suite(n).min_seeds for n in suite_names()})
    fewest = " or ".join(str(m) for m in minimums)
    return (f"Seeds per variant (1–10). A suite needs {fewest} (its own minimum) for an "
            f"interval and a rank; with fewer, the results are listed as provisional.")


class SubmissionForm(forms.Form):
    PUBLIC, PRIVATE = Objective.PUBLIC, Objective.PRIVATE

    name = forms.CharField(max_length=100, help_text="Shown on the leaderboard; its slug "
                           "names the objective's page.")
    description = forms.CharField(required=False, max_length=5000,
                                  widget=forms.Textarea(attrs={"rows": 3}))
    paper_url = forms.URLField(required=False, label="Paper URL", assume_scheme="https")
    code_file = forms.FileField(required=False, label="Upload a .py file")
    code_text = forms.CharField(required=False, strip=False, label="…or paste the code",
                                widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}))
    visibility = forms.ChoiceField(
        choices=[(PUBLIC, "Public code"), (PRIVATE, "Private code (only you see it)")],
        initial=PUBLIC, widget=forms.RadioSelect,
        help_text="Results are public once finished either way.")
    hyperparameters = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Optional, one key=value per line (Python literals), e.g. q=0.5; "
                  "the rest keep the objective's defaults.")
    suites = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked to run every suite the objective supports: a "
                  "suite runs only objectives defining one of the hooks it lists (e.g. a "
                  "classification_loss does not run on tta, which needs tta_loss or "
                  "tta_adjust).")
    seeds = forms.IntegerField(min_value=1, max_value=10, initial=5)  # help: _seeds_help
    tuned = forms.BooleanField(required=False, label="Also tune at equal budget",
                               initial=False)  # help: _tuned_help (its cost)

    def __init__(self, *args: Any, user, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["suites"].choices = _suite_choices()
        self.fields["seeds"].help_text = _seeds_help()
        self.fields["tuned"].help_text = _tuned_help()
        # None ticked = every suite the objective's hooks fit: no suite is ticked that would
        # refuse it (a classification loss is not a test-time objective, and the reverse).
        self.fields["suites"].initial = []
        self.fields["code_file"].widget.attrs["accept"] = ".py,text/x-python"
        self.warnings: list[str] = []
        self.objective: LoadedObjective | None = None
        self.plan: list[tuple[Suite, list[str], list[int]]] = []

    # --- fields ---------------------------------------------------------------------

    @property
    def code_errors(self) -> list[str]:
        """Errors of both code inputs, shown together next to the code."""
        return [*self.errors.get("code_file", []), *self.errors.get("code_text", [])]

    @property
    def max_bytes(self) -> int:
        return settings.MAX_OBJECTIVE_BYTES

    @property
    def slug(self) -> str:
        return slugify(self.cleaned_data.get("name", ""))[:100]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        hidden = hidden_characters(name)
        if hidden:  # a bidi override (U+202E) would show the name reversed on every page
            raise forms.ValidationError(
                f"The name contains control or text-direction characters ({', '.join(hidden)}); "
                f"use plain text.")
        slug = slugify(name)[:100]
        if not slug:
            raise forms.ValidationError("The name needs at least one letter or digit.")
        taken = Objective.objects.filter(slug=slug).first()
        if taken is not None and (taken.is_builtin or taken.owner_id != self.user.pk):
            raise forms.ValidationError(
                f"An objective named “{slug}” already exists; choose another name.")
        return name

    def clean_code_file(self) -> str:
        upload = self.cleaned_data.get("code_file")
        if not upload:
            return ""
        if not upload.name.lower().endswith(".py"):
            raise forms.ValidationError("Upload a Python source file (.py).")
        _check_size(upload.size)
        return _decode(upload.read())

    def clean_code_text(self) -> str:
        text = self.cleaned_data.get("code_text", "")
        if not text.strip():
            return ""
        _check_size(len(text.encode("utf-8")))
        if "\ufffd" in text:
            raise forms.ValidationError(
                "The code is not valid UTF-8 text (it contains replacement characters "
                "U+FFFD where undecodable bytes were); save it as UTF-8 and paste again.")
        return text.replace("\r\n", "\n")

    def clean_hyperparameters(self) -> dict[str, Any]:
        lines = [(i, line.strip()) for i, line in
                 enumerate(self.cleaned_data.get("hyperparameters", "").splitlines(), 1)]
        items = []
        for i, line in lines:
            if not line or line.startswith("#"):
                continue
            key, sep, _ = line.partition("=")
            if not sep or not key.strip().isidentifier():
                raise forms.ValidationError(f"Line {i}: expected key=value, got “{line}”.")
            items.append(line)
        try:
            return parse_assignments(items)
        except ObjectiveError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        uploaded, pasted = data.get("code_file"), data.get("code_text")
        if self.has_error("code_file") or self.has_error("code_text"):
            return data
        if bool(uploaded) == bool(pasted):
            self.add_error("code_text", "Upload a .py file or paste the code: exactly one.")
            return data
        if not self.has_error("name") and not self.has_error("hyperparameters"):
            self._validate_code(uploaded or pasted, "code_file" if uploaded else "code_text")
        if self.objective is not None and not self.has_error("suites") \
                and not self.has_error("seeds"):
            self._plan_cells(data)
        return data

    # --- validation -------------------------------------------------------------------

    def _validate_code(self, code: str, field: str) -> None:
        """The engine's validator on the code, in the sandbox (never in the web process);
        errors land on the field."""
        from harness.sandbox import SandboxUnavailable, validate_sandboxed

        overrides = self.cleaned_data.get("hyperparameters") or None
        try:
            validation = validate_sandboxed(code, code_filename(self.slug), overrides)
        except SandboxUnavailable:
            log.exception("the sandbox could not check a submission")
            self.add_error(field, "The code could not be checked right now (the server's "
                                  "sandbox is unavailable); nothing was queued. Try again.")
            return
        for problem in validation.problems:
            if problem.severity == "warning":
                self.warnings.append(problem.message)
            elif problem.code in HYPERPARAMETER_PROBLEMS:
                self.add_error("hyperparameters", problem.message)
            else:
                self.add_error(field, problem.message)
        if validation.ok and validation.objective is not None:
            self.objective = dataclasses.replace(validation.objective, name=self.slug)

    def _plan_cells(self, data: dict[str, Any]) -> None:
        supported = {s.name: s for s in suites_for(self.objective)}
        chosen = data.get("suites") or list(supported)
        unsupported = [n for n in chosen if n not in supported]
        if unsupported:
            hooks = ", ".join(self.objective.hooks)
            needs = "; ".join(f"{n} needs {' or '.join(get_suite(n).accepted_hooks)}"
                              for n in unsupported)
            self.add_error("suites", f"{', '.join(unsupported)}: not supported by an "
                           f"objective defining {hooks} ({needs}).")
            return
        if not chosen:
            self.add_error("suites", "No suite can run this objective's hooks.")
            return
        seeds = list(range(data["seeds"]))
        held_out = self._held_out_allowed([supported[n] for n in chosen])
        self.plan = [(configured(supported[n]), _submitted_variants(supported[n], held_out),
                      seeds) for n in chosen]
        if data.get("tuned"):
            tunable = [n for n in chosen if supported[n].tuning is not None]
            if not tunable:
                self.add_error("tuned", "None of the chosen suites has a tuned protocol "
                               f"(those with one: {', '.join(_tunable())}).")
                return
            hooks = self.objective.hooks  # the protocol tunes training, not post-hoc maps
            tunable = [n for n in tunable if supported[n].tunes(hooks)]
            if not tunable:
                self.add_error("tuned", "The tuned track tunes training objectives; this one "
                               f"defines {', '.join(hooks)}, which trains nothing to tune "
                               "on the chosen suites.")
                return
            space = self.objective.search_space
            set_here = [k for k in (data.get("hyperparameters") or {})
                        if k in space and "fixed" not in space[k]]
            if set_here:
                self.add_error("hyperparameters", f"{', '.join(set_here)}: the tuned track "
                               f"tunes {'these' if len(set_here) > 1 else 'this'} (the "
                               f"objective's SEARCH_SPACE); leave it unset, or untick the "
                               f"tuned track.")
                return
            # public variants only: a tuned run is no way to probe the held-out ones
            self.plan += [(configured(supported[n]).tuned(),
                           list(supported[n].default_variants), seeds) for n in tunable]
        short = [f"{n} (at least {supported[n].min_seeds})" for n in chosen
                 if len(seeds) < supported[n].min_seeds]
        if short:
            self.warnings.append(
                f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} are fewer than "
                f"{', '.join(short)} needs for an interval and a rank: the results will be "
                f"listed as provisional, unranked. Submit again with more seeds to rank them.")
        self._check_cap()

    @property
    def held_out_note(self) -> str:
        """The user's held-out allowance, where this server runs held-out variants."""
        from harness.contract import heldout
        from webapp.quota import allowance

        if not heldout.available():
            return ""
        left = allowance(self.user)
        return (f"Held-out variants: {left.remaining} of {left.limit} runs left in the last "
                f"24 hours (each submission that runs them is one; past the limit a "
                f"submission runs the public variants only).")

    def _held_out_allowed(self, suites: list[Suite]) -> bool:
        """Whether this submission may run the held-out variants: within the user's
        allowance (webapp/quota.py), else a warning says it runs the public ones only."""
        from harness.contract import heldout
        from webapp.quota import allowance

        if not heldout.available() or not any(s.held_out for s in suites):
            return False
        left = allowance(self.user)
        if left.remaining > 0:
            return True
        self.warnings.append(left.message())
        return False

    def _check_cap(self) -> bool:
        """Refuse (with a form error) a submission that would pass the per-user cell cap."""
        cap = settings.MAX_QUEUED_CELLS_PER_USER
        active = Cell.objects.filter(version__objective__owner=self.user,
                                     status__in=(Cell.QUEUED, Cell.RUNNING)).count()
        new = self._new_cell_count()
        if active + new <= cap:
            return True
        self.add_error(None, f"This submission would queue {new} cells and you already have "
                       f"{active} queued or running; the limit is {cap} per user. Wait for "
                       f"your runs to finish, or choose fewer suites or seeds.")
        return False

    def _new_cell_count(self) -> int:
        version = ObjectiveVersion.objects.filter(
            objective__slug=self.slug, objective__owner=self.user,
            key=self.objective.version_key).first()
        total = 0
        for suite, variants, seeds in self.plan:
            # a tuned track's final cells also store every trial's search cells
            search = suite.tuning.search_members if is_tuned_final(suite.version) else 0
            for variant in variants:
                kept = 0 if version is None else (
                    Cell.objects.filter(version=version, suite=suite.name,
                                        suite_version=suite.version, variant=variant,
                                        seed__in=seeds)
                    .exclude(status__in=RETRIED).count())
                total += len(seeds) - kept + (search if kept < len(seeds) else 0)
        return total

    # --- saving -----------------------------------------------------------------------

    def save(self) -> Submission | None:
        """Create everything in one transaction; None (with a form error) if a concurrent
        submission took the name or the user's cell budget in the meantime."""
        try:
            with transaction.atomic():
                get_user_model().objects.select_for_update().get(pk=self.user.pk)
                if not self._check_cap():
                    return None
                submission = self._create()
                transaction.on_commit(partial(executors.enqueue, submission))
                return submission
        except IntegrityError:
            self.add_error("name", "That name was just taken; choose another name.")
            return None

    def _create(self) -> Submission:
        data, loaded = self.cleaned_data, self.objective
        objective, created = Objective.objects.get_or_create(
            slug=self.slug, defaults={"owner": self.user})
        if not created and objective.owner_id != self.user.pk:
            raise IntegrityError("slug owned by another user")
        objective.name = data["name"]
        objective.description = data["description"] or loaded.description
        objective.paper_url = data["paper_url"]
        objective.visibility = data["visibility"]
        objective.save()
        version, _ = ObjectiveVersion.objects.get_or_create(
            objective=objective, key=loaded.version_key,
            defaults={"code": loaded.source, "code_sha256": loaded.code_sha256,
                      "hyperparameters": dict(loaded.hyperparameters), "label": loaded.label})
        submission = Submission.objects.create(
            owner=self.user, version=version,
            suites=list(dict.fromkeys(s.name for s, _, _ in self.plan)),  # tuned: listed once
            seeds=data["seeds"])
        cells = []
        for suite, variants, seeds in self.plan:
            for variant in variants:
                for seed in seeds:
                    cells.append(queued_cell(version, suite, variant, seed))
        submission.cells.set(cells)
        return submission


def queued_cell(version: ObjectiveVersion, suite: Suite, variant: str, seed: int) -> Cell:
    """The cell for this key: created queued, or an existing one (requeued if it failed)."""
    cell, created = Cell.objects.get_or_create(
        version=version, suite=suite.name, suite_version=suite.version, variant=variant,
        seed=seed, defaults={"variant_hash": suite.variant(variant).config_hash(suite)})
    if not created and cell.status in RETRIED:  # a fresh start: nothing of the last run
        cell.status, cell.error, cell.reason, cell.captured = Cell.QUEUED, "", "", ""
        cell.started_at = cell.finished_at = cell.heartbeat_at = cell.enqueued_at = None
        cell.worker = ""
        cell.save(update_fields=["status", "error", "reason", "captured", "started_at",
                                 "finished_at", "heartbeat_at", "enqueued_at", "worker"])
    return cell


def _check_size(size: int) -> None:
    limit = settings.MAX_OBJECTIVE_BYTES
    if size > limit:
        raise forms.ValidationError(
            f"The code is {filesizeformat(size)}; the limit is {filesizeformat(limit)}.")


def _decode(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise forms.ValidationError(
            f"The file is not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at position "
            f"{exc.start}); save it as UTF-8 and upload it again.") from exc
    return text.replace("\r\n", "\n")


def _submitted_variants(suite, held_out: bool) -> list[str]:
    """What a submission runs: the default variants, and the held-out ones where this
    server holds their secret (harness.contract.heldout) and the user's allowance lets it
    (``held_out``)."""
    return [*suite.default_variants, *(v.name for v in suite.held_out if held_out)]
