"""The Pauses and Circuit breakers pages: what holds jobs back, pause a queue or task, resume, close.

Rows change only through the services (services/holds.py,
services/circuits.py): the add form of a pause calls ``holds.pause`` and
nothing edits or deletes a row here. Pausing, resuming and closing a
breaker need ``pause_work``, checked on the server; each is recorded in the
admin log (LogEntry) with who did it and why, like a requeue. Held counts
come from the read model `jobstatus` uses (services/console/status_holds.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, CHANGE
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from django_jobretry.admin import audit
from django_jobretry.admin.base import NoWritesAdmin
from django_jobretry.admin.selection import actor
from django_jobretry.models import Circuit, CircuitState, Job, Pause
from django_jobretry.models.holds import REASON_MAX_LENGTH
from django_jobretry.services import circuits, holds
from django_jobretry.services.console.status_holds import held

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _PauseBase = admin.ModelAdmin[Pause]
    _PauseForm = forms.ModelForm[Pause]
else:
    _PauseBase = admin.ModelAdmin
    _PauseForm = forms.ModelForm

#: The permission every action here needs.
PAUSE_WORK = "django_jobretry.pause_work"


class HeldFilter(admin.SimpleListFilter):
    """Jobs a pause or a breaker holds now (``?held=yes``), what the dashboard's Held panel links to."""

    title = "held"
    parameter_name = "held"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Held by a pause or a breaker")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() is None:
            return queryset
        if self.value() != "yes":
            raise IncorrectLookupParameters(f"held is 'yes' or absent, not {self.value()!r}")
        return queryset.filter(held())


class PauseForm(_PauseForm):
    """Exactly one of queue and task, an optional reason and end; checked as the service checks them."""

    class Meta:
        model = Pause
        fields = ("queue_name", "task_name", "reason", "until")
        help_texts = {
            "queue_name": "Pause every task's jobs on this queue, or",
            "task_name": "pause this task's jobs (its registered name).",
            "until": "Optional: the pause ends by itself then. Without it, only a resume ends it.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            holds.target(queue=data.get("queue_name") or None, task=data.get("task_name") or None)
        except holds.InvalidHold as exc:
            raise forms.ValidationError(str(exc)) from None
        until = data.get("until")
        if until is not None and until <= timezone.now():
            self.add_error("until", f"{until.isoformat()} has passed: give a later time, or none.")
        if len(data.get("reason") or "") > REASON_MAX_LENGTH:
            self.add_error("reason", f"at most {REASON_MAX_LENGTH} characters are kept")
        return data


class PauseAdmin(_PauseBase):
    """The pauses in force; "add" pauses through the service, the action resumes."""

    form = PauseForm
    list_display = ("target", "paused_by", "reason", "paused_at", "until", "held_jobs")
    actions = ("resume_selected",)
    readonly_fields = ("queue_name", "task_name", "paused_by", "reason", "paused_at", "until")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(PAUSE_WORK)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_pause_work_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(PAUSE_WORK)

    def get_readonly_fields(self, request: HttpRequest, obj: Pause | None = None) -> tuple[str, ...]:
        return self.readonly_fields if obj is not None else ()

    @admin.display(description="paused")
    def target(self, obj: Pause) -> str:
        return str(obj)

    @admin.display(description="due jobs held")
    def held_jobs(self, obj: Pause) -> int:
        column = (
            {"queue_name": obj.queue_name} if obj.queue_name is not None else {"task_name": obj.task_name}
        )
        return Job.objects.filter(held(), **column).count()

    def save_model(self, request: HttpRequest, obj: Pause, form: Any, change: bool) -> None:
        """Pause through the service (every worker, at its next claim), never by saving the form."""
        holds.pause(
            queue=obj.queue_name or None,
            task=obj.task_name or None,
            actor=actor(request),
            reason=obj.reason,
            until=obj.until,
        )
        obj.pk = Pause.objects.get(**_target(obj)).pk

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        said = f"Paused: {obj.reason}." if obj.reason else "Paused (no reason given)."
        audit.log(request, [(obj, ADDITION, said, f"{obj} paused")])

    @admin.action(permissions=["pause_work"], description="Resume selected")
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Pause]) -> None:
        done = []
        for row in queryset:
            ended = holds.resume(queue=row.queue_name, task=row.task_name, actor=actor(request))
            if ended is not None:
                audit.log(request, [(row, CHANGE, "Resumed.", f"{row} resumed")])
                done.append(f"{row} ({ended.held} jobs released)")
        if done:
            self.message_user(request, f"Resumed: {', '.join(done)}.", messages.SUCCESS)
        else:
            self.message_user(request, "Nothing to do: not paused any more.", messages.WARNING)


class CircuitAdmin(NoWritesAdmin):
    """Each task's breaker: its state, until when, its probe and what it holds; "close now"."""

    list_display = ("task_name", "state", "open_until", "opens", "probe_job_id", "reason", "held_jobs")
    list_filter = ("state",)
    search_fields = ("task_name",)
    actions = ("close_selected",)

    def has_pause_work_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(PAUSE_WORK)

    @admin.display(description="jobs held")
    def held_jobs(self, obj: Circuit) -> int:
        if obj.state == CircuitState.CLOSED:
            return 0
        return Job.objects.filter(held(), task_name=obj.task_name).count()

    @admin.action(permissions=["pause_work"], description="Close selected breakers now (release their jobs)")
    def close_selected(self, request: HttpRequest, queryset: QuerySet[Circuit]) -> None:
        closed: list[str] = []
        for row in queryset:
            done = circuits.close_by_hand(row.task_name, actor=actor(request))
            if done is None:
                continue
            name = row.task_name
            audit.log(
                request, [(Circuit(task_name=name), CHANGE, "Closed by hand.", f"Circuit of {name} closed")]
            )
            closed.append(f"{name} ({done.released} jobs released, {done.rate:g} a second)")
        if closed:
            self.message_user(request, f"Closed: {', '.join(closed)}.", messages.SUCCESS)
        else:
            self.message_user(request, "Nothing to do: no selected breaker was open.", messages.WARNING)


def _target(obj: Pause) -> dict[str, str | None]:
    return {"queue_name": obj.queue_name} if obj.queue_name else {"task_name": obj.task_name}
