"""The Pauses and Circuit breakers pages: what holds jobs back, pause a queue or task, resume, close.

Rows change only through the services (holds/pauses.py,
holds/breakers.py): the add form of a pause (:class:`PauseForm`)
calls ``pauses.pause`` and nothing edits or deletes a row here. Pausing,
resuming and closing a breaker need ``pause_work``, checked on the server, and ask "are you sure?"
first (holds/panel.py); each is recorded in the admin log
(LogEntry) with who did it and why, like a requeue. Held counts
come from the functions `jobstatus` uses (holds/__init__.py).

The add form is checked as the service checks a pause, so a mistake is a
form error on its field and nothing is stored. A name neither declared nor
on any job is refused with the close names unless "Not deployed yet" is
ticked: a task or queue whose code comes later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import ADDITION, CHANGE
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobretry.admin import audit, rendering
from django_jobretry.admin.audit import actor
from django_jobretry.admin.base import NoWritesAdmin, warn_ignored
from django_jobretry.holds import breakers, held_by_breaker, held_by_pause, panel, pauses
from django_jobretry.holds.panel import PAUSE_WORK
from django_jobretry.models import Circuit, CircuitState, Job, Pause
from django_jobretry.models.holds import REASON_MAX_LENGTH
from django_jobretry.models.job_states import held_filter

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    from django.http.request import _ImmutableQueryDict

    _PauseBase = admin.ModelAdmin[Pause]
    _PauseForm = forms.ModelForm[Pause]
else:
    _PauseBase = admin.ModelAdmin
    _PauseForm = forms.ModelForm

#: What the form says instead of the Python keyword the service's message names.
UNDEPLOYED = "Tick “Not deployed yet” to pause it before it is deployed."


class PauseForm(_PauseForm):
    """Exactly one of queue and task, known unless ``undeployed``; an optional reason and end."""

    undeployed = forms.BooleanField(
        required=False,
        label="Not deployed yet",
        help_text="Pause this name although no code declares it and no job has it yet. "
        "Without this, such a name is refused as a likely typo.",
    )

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
            where = pauses.target(queue=data.get("queue_name") or None, task=data.get("task_name") or None)
        except pauses.InvalidHold as exc:
            raise forms.ValidationError(str(exc)) from None
        if not data.get("undeployed"):
            try:
                pauses.check_known(where)
            except pauses.UnknownName as exc:
                self.add_error(where.column, f"{exc.problem} {UNDEPLOYED}")
        until = data.get("until")
        if until is not None and until <= timezone.now():
            self.add_error("until", f"{until.isoformat()} has passed: give a later time, or none.")
        else:
            try:
                pauses.check_until(until)
            except pauses.InvalidHold as exc:
                self.add_error("until", str(exc))
        if len(data.get("reason") or "") > REASON_MAX_LENGTH:
            self.add_error("reason", f"at most {REASON_MAX_LENGTH} characters are kept")
        return data


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
        return queryset.filter(held_filter())


class PauseAdmin(_PauseBase):
    """The pauses in force; "add" pauses through the service, the action resumes."""

    form = PauseForm
    list_display = ("target", "held_since", "paused_by", "reason", "until_shown", "held_jobs")
    actions = ("resume_selected",)
    readonly_fields = ("queue_name", "task_name", "paused_by", "reason", "paused_at_shown", "until_shown")

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    until_shown = rendering.time_column("until")
    paused_at_shown = rendering.time_column("paused_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Pause]:
        return super().get_queryset(request).annotate(jobretry_now=Now())

    def get_fields(self, request: HttpRequest, obj: Pause | None = None) -> Any:
        """The form's fields to add one; a pause itself is shown, to the second, never edited."""
        return self.readonly_fields if obj is not None else super().get_fields(request, obj)

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
    def target(self, obj: Pause) -> SafeString:
        return format_html('<span class="jobretry-task-name">{}</span>', str(obj))

    @admin.display(description="held since", ordering="paused_at")
    def held_since(self, obj: Pause) -> SafeString | str:
        return rendering.since_html(obj.paused_at, obj.jobretry_now)  # type: ignore[attr-defined]

    @admin.display(description="due jobs held")
    def held_jobs(self, obj: Pause) -> int:
        """What `pause`, `jobstatus` and the dashboard count (status.held_by_pause)."""
        if obj.queue_name is not None:
            return held_by_pause("queue", obj.queue_name)
        return held_by_pause("task", str(obj.task_name))

    def save_model(self, request: HttpRequest, obj: Pause, form: Any, change: bool) -> None:
        """Pause through the service (every worker, at its next claim), never by saving the form."""
        pauses.pause(
            queue=obj.queue_name or None,
            task=obj.task_name or None,
            actor=actor(request),
            reason=obj.reason,
            until=obj.until,
            undeployed=bool(form.cleaned_data.get("undeployed")),
        )
        obj.pk = Pause.objects.get(**_target(obj)).pk

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        said = f"Paused: {obj.reason}." if obj.reason else "Paused (no reason given)."
        audit.log(request, [(obj, ADDITION, said, f"{obj} paused")])

    @admin.action(permissions=["pause_work"], description="Resume selected")
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Pause]) -> TemplateResponse | None:
        if not panel.confirmed(request):
            return panel.resume_page(self, request, queryset)
        done = []
        for row in queryset:
            ended = pauses.resume(queue=row.queue_name, task=row.task_name, actor=actor(request))
            if ended is not None:
                audit.log(request, [(row, CHANGE, "Resumed.", f"{row} resumed")])
                jobs = "job" if ended.held == 1 else "jobs"
                done.append(f"{row} ({ended.held} {jobs} released)")
        if done:
            self.message_user(request, f"Resumed: {', '.join(done)}.", messages.SUCCESS)
        else:
            self.message_user(request, "Nothing to do: not paused any more.", messages.WARNING)
        return None


class CircuitAdmin(NoWritesAdmin):
    """Each task's breaker: its state, until when, its probe and what it holds; "close now"."""

    list_display = ("breaker", "held_since", "until", "reason", "held_jobs")
    list_filter = ("state",)
    search_fields = ("task_name",)
    actions = ("close_selected",)
    fields = (
        *("task_name", "state", "opened_at_shown", "open_until_shown", "opens", "probe_job_id", "reason"),
        *("failures", "window_started_at_shown", "cooldown_seconds", "max_cooldown_seconds"),
        *("release_per_second", "updated_at_shown"),
    )
    readonly_fields = fields

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    opened_at_shown = rendering.time_column("opened_at")
    open_until_shown = rendering.time_column("open_until")
    window_started_at_shown = rendering.time_column("window_started_at")
    updated_at_shown = rendering.time_column("updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Circuit]:
        rows: QuerySet[Circuit] = super().get_queryset(request)
        return rows.annotate(jobretry_now=Now())

    @admin.display(description="breaker", ordering="task_name")
    def breaker(self, obj: Circuit) -> SafeString:
        """The task, and the breaker's state below it (red unless closed)."""
        css = "jobretry-quiet" if obj.state == CircuitState.CLOSED else "jobretry-quiet jobretry-dead"
        return format_html(
            '<span class="jobretry-task-name">{}</span><span class="{}">{}</span>',
            obj.task_name,
            css,
            obj.get_state_display(),
        )

    @admin.display(description="held since", ordering="opened_at")
    def held_since(self, obj: Circuit) -> SafeString | str:
        if obj.state == CircuitState.CLOSED:
            return "-"
        return rendering.since_html(obj.opened_at, obj.jobretry_now)  # type: ignore[attr-defined]

    @admin.display(description="until", ordering="open_until")
    def until(self, obj: Circuit) -> SafeString | str:
        """The end of the cooldown and the opening's number; the probe while half-open."""
        if obj.state == CircuitState.CLOSED:
            return "-"
        if obj.state == CircuitState.HALF_OPEN:
            return f"probe job {obj.probe_job_id} succeeds"
        return format_html(
            '{}<span class="jobretry-quiet">opening {}</span>', rendering.time_html(obj.open_until), obj.opens
        )

    def has_pause_work_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(PAUSE_WORK)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Never a value holding NUL: PostgreSQL stores none, so the query could only fail (a 400 instead)."""
        return "\x00" not in value and super().lookup_allowed(lookup, value, request)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A breaker by its task's name; a name no task can have (a NUL) is "not found", never a 500."""
        if not task_name(object_id):
            return None
        return super().get_object(request, object_id, from_field)

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Circuit], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Django's, without posted names no task can have: PostgreSQL would refuse the query (a 500)."""
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        kept = [value for value in selected if task_name(value)]
        if kept != selected:
            post = request.POST.copy()
            post.setlist(helpers.ACTION_CHECKBOX_NAME, kept)
            request.POST = cast("_ImmutableQueryDict", post)
            warn_ignored(self, request, len(selected) - len(kept))
        return super().response_action(request, queryset, *args, **kwargs)

    @admin.display(description="jobs held")
    def held_jobs(self, obj: Circuit) -> int:
        """What `jobstatus` and the dashboard count (status.held_by_breaker)."""
        return held_by_breaker(obj)

    @admin.action(permissions=["pause_work"], description="Close selected breakers now (release their jobs)")
    def close_selected(self, request: HttpRequest, queryset: QuerySet[Circuit]) -> TemplateResponse | None:
        if not panel.confirmed(request):
            return panel.close_page(self, request, queryset)
        closed: list[str] = []
        for row in queryset:
            done = breakers.close_by_hand(row.task_name, actor=actor(request))
            if done is None:
                continue
            name = row.task_name
            audit.log(
                request, [(Circuit(task_name=name), CHANGE, "Closed by hand.", f"Circuit of {name} closed")]
            )
            jobs = "job" if done.released == 1 else "jobs"
            closed.append(f"{name} ({done.released} {jobs} released, {done.rate:g} a second)")
        if closed:
            self.message_user(request, f"Closed: {', '.join(closed)}.", messages.SUCCESS)
        else:
            self.message_user(request, "Nothing to do: no selected breaker was open.", messages.WARNING)
        return None


def task_name(text: str) -> bool:
    """Whether ``text`` could be a task's name, so a breaker's key (holds/pauses.py ``target``)."""
    try:
        pauses.target(task=text)
    except pauses.InvalidHold:
        return False
    return True


def _target(obj: Pause) -> dict[str, str | None]:
    return {"queue_name": obj.queue_name} if obj.queue_name else {"task_name": obj.task_name}
