"""Pause, resume and run now from the admin: changelist actions over schedules/rows.py.

Each asks "are you sure?" first, the way the dead-letter actions do
(admin/operations.py): a pause stops a schedule on every worker, and a run
now starts a real job. Pause and resume need ``pause_schedule``, run now
``run_schedule``; the rights are checked on the server, not only by hiding
the actions. What happened is reported one message per outcome, never a
traceback: a name this deploy does not declare, a run the schedule's
overlap refuses. Each change is logged in the admin log (LogEntry), like a
requeue (admin/audit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import ADDITION, CHANGE
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from django_jobretry.admin import audit
from django_jobretry.admin.audit import actor
from django_jobretry.admin.base import holds
from django_jobretry.exceptions import InvalidJob
from django_jobretry.models import Job, Schedule
from django_jobretry.schedules import declared, rows

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Base = admin.ModelAdmin[Schedule]
else:
    _Base = admin.ModelAdmin

TEMPLATE = "admin/django_jobretry/schedule/confirmation.html"
#: The confirmation page's reason field.
REASON_FIELD = "jobretry_reason"
#: What each action does, said on its confirmation page.
FOLLOWS = {
    "pause": "Each stops making runs, on every worker, until resumed; runs already made go on. Slots "
    "that come due while paused are decided at the resume by its catch-up policy, as after downtime.",
    "resume": "Each makes runs again; the slots that came due while it was paused are decided by its "
    "catch-up policy (with catch_up latest, one run for the newest).",
    "run": "Each gets one run now, outside its slots, unless its overlap policy refuses it (overlap skip "
    "or queue while a run is still ready, running or retrying).",
}
BUTTONS = {"pause": "Yes, pause", "resume": "Yes, resume", "run": "Yes, run now"}


class ScheduleActions(_Base):
    """The three actions, each behind its permission and a confirmation page."""

    def has_pause_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return holds(request, self.opts, "pause")

    def has_run_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return holds(request, self.opts, "run")

    @admin.action(permissions=["pause"], description="Pause selected schedules")
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> TemplateResponse | None:
        return self._confirmed(request, queryset, "pause")

    @admin.action(permissions=["pause"], description="Resume selected schedules")
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> TemplateResponse | None:
        return self._confirmed(request, queryset, "resume")

    @admin.action(permissions=["run"], description="Run selected schedules now")
    def run_selected(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> TemplateResponse | None:
        return self._confirmed(request, queryset, "run")

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Django's, once no ticked name holds a NUL, which PostgreSQL cannot compare (a forged form)."""
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if any("\x00" in name for name in selected):
            self.message_user(
                request, "A selected name holds a NUL character: nothing was done.", messages.ERROR
            )
            return None
        return super().response_action(request, queryset, *args, **kwargs)

    def _confirmed(
        self, request: HttpRequest, queryset: QuerySet[Schedule], verb: str
    ) -> TemplateResponse | None:
        """The confirmation page; on "yes", the action on each schedule, then one report."""
        allowed = self.has_run_permission(request) if verb == "run" else self.has_pause_permission(request)
        if not allowed:  # Django refuses actions a user lacks already: check again
            raise PermissionDenied
        names = sorted(queryset.values_list("name", flat=True))
        reason = request.POST.get(REASON_FIELD, "").strip()
        problem = _reason_problem(reason) if verb == "pause" else ""
        if request.POST.get("post") != "yes" or problem:
            return self._page(request, verb, names, reason, problem)
        done: list[tuple[str, str]] = []
        unchanged: list[str] = []
        for name in names:
            try:
                outcome = self._one(request, verb, name, reason)
            except InvalidJob as exc:  # ScheduleNotFound, RunRefused, a run this deploy cannot make
                self.message_user(request, f"{name}: {exc}", messages.ERROR)
                continue
            if outcome is None:
                unchanged.append(name)
            else:
                done.append((name, outcome))
        self._report(verb, request, done, unchanged)
        return None

    def _one(self, request: HttpRequest, verb: str, name: str, reason: str) -> str | None:
        """Act on one schedule and log it; what to report, or None when it was that way already."""
        who = actor(request)
        schedule = Schedule(name=name)
        if verb == "pause":
            if not rows.pause(name, actor=who, reason=reason):
                return None
            said = f"Paused: {reason}." if reason else "Paused (no reason given)."
            audit.log(request, [(schedule, CHANGE, said, f"Schedule {name} paused")])
            return name
        if verb == "resume":
            if not rows.resume(name, actor=who):
                return None
            audit.log(request, [(schedule, CHANGE, "Resumed.", f"Schedule {name} resumed")])
            return name
        job_id = rows.run_now(name, actor=who)
        audit.log(
            request,
            [
                (schedule, CHANGE, f"Run now as job {job_id}.", f"Schedule {name} run now as job {job_id}"),
                (Job(pk=job_id), ADDITION, f"Run now of schedule {name}.", f"Job {job_id} run now ({name})"),
            ],
        )
        return f"{name} as job {job_id}"

    def _report(
        self, verb: str, request: HttpRequest, done: list[tuple[str, str]], unchanged: list[str]
    ) -> None:
        past = {"pause": "Paused", "resume": "Resumed", "run": "Run now"}[verb]
        if done:
            self.message_user(
                request, f"{past}: {', '.join(outcome for _, outcome in done)}.", messages.SUCCESS
            )
        if unchanged:
            state = "paused already" if verb == "pause" else "not paused"
            self.message_user(request, f"Nothing to do, {state}: {', '.join(unchanged)}.", messages.WARNING)

    def _page(
        self, request: HttpRequest, verb: str, names: list[str], reason: str, problem: str
    ) -> TemplateResponse:
        """The question, the schedules it is about (those not declared here flagged), Yes and No."""
        specs = declared()
        found = Schedule.objects.filter(name__in=names).only("name", "task_name", "cadence", "paused_at")
        noun = "schedule" if len(names) == 1 else "schedules"
        question = {"pause": "Pause", "resume": "Resume", "run": "Run"}[verb] + f" {len(names)} {noun}"
        context = {
            **self.admin_site.each_context(request),
            "title": "Are you sure?",
            "subtitle": None,
            "opts": self.opts,
            "verb": verb,
            "question": question + (" now?" if verb == "run" else "?"),
            "follows": FOLLOWS[verb] + " The admin log records who did it.",
            "button": BUTTONS[verb],
            "items": [(row, row.name in specs) for row in found.order_by("name")],
            "action": request.POST.get("action", f"{verb}_selected"),
            "names": names,
            "reason_field": REASON_FIELD if verb == "pause" else "",
            "reason": reason,
            "reason_limit": rows.PAUSE_REASON_CHARS,
            "problem": problem,
            "cancel_url": reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"),
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)


def _reason_problem(reason: str) -> str:
    """What is wrong with a pause reason typed (or forged) into the form, or ""."""
    limit = rows.PAUSE_REASON_CHARS
    if len(reason) > limit:
        return f"The reason is {len(reason)} characters long; at most {limit} are kept. Nothing was paused."
    if "\x00" in reason:
        return "The reason holds a NUL character, which cannot be stored. Nothing was paused."
    return ""
