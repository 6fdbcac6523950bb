"""The read-only admin base of the job and dead-letter pages.

A dead letter is the job it was, plus how it died: both pages show the same
task, attempt count, histories and stylesheet, with the same changelist
(light, capped count) and the same rule - nothing is added or edited here,
because state changes only through the services.

Everything a request sends is untrusted here: URL filters may not touch the
arguments of users who cannot see them, and an id is ASCII digits or nothing
(docs/admin.md#what-the-admin-refuses).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast, override

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_permission_codename
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from django_jobretry.admin import rendering
from django_jobretry.admin.audit import Fate
from django_jobretry.admin.changelist import CappedCountPaginator, LightChangeList
from django_jobretry.display import progress_words
from django_jobretry.models import DeadLetter, Job

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    from django.http.request import _ImmutableQueryDict

    _Base = admin.ModelAdmin[Any]
else:
    _Base = admin.ModelAdmin

#: The columns holding job arguments (and what a django.tasks task returned, which
#: may be as personal; and django-q2's signed package of a dead letter from there,
#: its arguments pickled in readable base64): no URL filter or search reaches them
#: without the right to see them (rendering.can_filter_payload).
PAYLOAD_FIELDS = frozenset({"args", "kwargs", "return_value", "external_payload"})
#: Lookups the admin never runs from a URL: PostgreSQL compiles the pattern it
#: is sent, so a bad one is an error and a pathological one a slow scan.
REFUSED_LOOKUPS = frozenset({"regex", "iregex"})
#: A row id as the admin accepts it from a request. ``str.isdigit()`` and ``int()``
#: also take "²", "١٢" or " 12 "; 18 digits always fit a bigint.
_ID = re.compile(r"[0-9]{1,18}")


def holds(request: HttpRequest, opts: Any, action: str) -> bool:
    """Whether the user holds the model's permission for ``action`` (requeue -> requeue_deadletter)."""
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


def parse_id(text: str) -> int | None:
    """``text`` as a row id if it is 1 to 18 ASCII digits, else None."""
    return int(text) if _ID.fullmatch(text) else None


def touches_payload(path: str) -> bool:
    """Whether a lookup or search path (``kwargs__password__startswith``, ``^args``) reads arguments."""
    return path.lstrip("^=@").split(LOOKUP_SEP)[0] in PAYLOAD_FIELDS


class NoWritesAdmin(_Base):
    """An admin that adds, edits and deletes nothing, whatever the user's permissions.

    Rows change only through the services (a job's transitions, the
    dead-letter service) or, for workers, their own heartbeats: a row deleted
    here would be written back, or lose what the services keep consistent.
    Deleting a dead letter is discarding, which has its own permission and action.
    """

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @override
    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        """Django's detail page, with what :meth:`detail_context` adds for this row and this viewer."""
        context.update(self.detail_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def detail_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What a detail page adds to Django's context: its heading, what depends on the viewer's rights."""
        return {}


class ReadOnlyRecordAdmin(NoWritesAdmin):
    """The base of JobAdmin and DeadLetterAdmin: shared columns, read-only rights.

    Nothing can be added, edited or deleted here; the dead-letter admin's
    requeue and discard go through the dead-letter service.
    """

    list_per_page = 50
    # The tables can hold millions of rows: never COUNT(*) all of them just to draw a list.
    show_full_result_count = False
    paginator = CappedCountPaginator

    class Media:
        css = {"all": ("django_jobretry/admin.css",)}

    @admin.display(description="task", ordering="task_name")
    def task(self, obj: Job | DeadLetter) -> SafeString:
        return rendering.task_cell(obj.task_name, *self.task_notes(obj))

    def task_notes(self, obj: Job | DeadLetter) -> list[str]:
        """What the task cell says under the task: its queue (one column fewer fits a list in 1280 px)."""
        return [f"queue {obj.queue_name}"]

    @admin.display(description="attempts", ordering="attempts")
    def attempts_display(self, obj: Job | DeadLetter) -> str:
        return f"{obj.attempts}/{obj.max_attempts}"

    def requeue_note(self, obj: Job | DeadLetter) -> SafeString | str:
        """ "requeued twice" under a list cell, for rows that came back from the dead letters."""
        if not obj.requeue_count:
            return ""
        return format_html('<span class="jobretry-quiet">{}</span>', requeued_times(obj.requeue_count))

    @admin.display(description="progress")
    def progress_shown(self, obj: Job | DeadLetter) -> SafeString | str:
        """How far the last attempt got (docs/progress.md): a bar, the words, the job's note, and when."""
        words = progress_words(obj.progress_done, obj.progress_total)
        if not words:
            return "-"
        bar = (
            format_html('<progress max="{}" value="{}"></progress> ', obj.progress_total, obj.progress_done)
            if obj.progress_total
            else ""
        )
        note = f" · {obj.progress_note}" if obj.progress_note else ""
        at = rendering.time_html(obj.progress_at)
        return format_html('{}{}{}<span class="jobretry-quiet">reported at {}</span>', bar, words, note, at)

    def progress_note_cell(self, obj: Job | DeadLetter) -> SafeString | str:
        """The progress under the status in the list, the note only on hover: the cell stays short."""
        words = progress_words(obj.progress_done, obj.progress_total)
        if not words:
            return ""
        if not obj.progress_note:
            return format_html('<span class="jobretry-quiet">{}</span>', words)
        return format_html('<span class="jobretry-quiet" title="{}">{}</span>', obj.progress_note, words)

    @admin.display(description="attempts, oldest first")
    def attempt_history(self, obj: Job | DeadLetter) -> SafeString:
        return rendering.attempt_history(obj.errors, obj.attempts)

    @admin.display(description="enqueued in trace")
    def enqueue_trace(self, obj: Job | DeadLetter) -> SafeString | str:
        return rendering.enqueue_trace(obj)

    @admin.display(description="requeues")
    def requeue_history_table(self, obj: Job | DeadLetter) -> SafeString:
        return rendering.requeue_history(obj.requeue_history)

    # Timestamps are read through a guard: 'infinity' in a row must not break its page.
    enqueued_at_shown = rendering.time_column("enqueued_at")
    first_attempt_at_shown = rendering.time_column("first_attempt_at")

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LightChangeList

    def list_page(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        """The rows of one list page, before they load: where a list adds columns it computes in SQL."""
        return rows

    def fate_of(self, pk: int) -> Fate | None:
        """What became of row ``pk`` if it is gone (admin/audit.py); None: nothing says."""
        return None

    def _get_obj_does_not_exist_redirect(
        self, request: HttpRequest, opts: Any, object_id: str
    ) -> HttpResponse:
        """A row that moved (requeued, died) leads to what it became; else Django's "doesn't exist".

        Django calls this from the detail, history and delete pages. The history
        page calls it before checking the view permission, so it is checked here.
        """
        pk = parse_id(unquote(object_id))
        found = self.fate_of(pk) if pk is not None and self.has_view_permission(request) else None
        if found is None:
            default: HttpResponse = super()._get_obj_does_not_exist_redirect(  # type: ignore[misc]
                request, opts, object_id
            )
            return default
        self.message_user(request, found.message, found.level)
        user = request.user
        url = found.url(user.has_perm(rendering.VIEW_JOB), user.has_perm(rendering.VIEW_DEAD_LETTER))
        return HttpResponseRedirect(url or reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Refuses URL filters on arguments (unless allowed), regex lookups and NUL characters.

        A filter on an argument answers "does a row match?": enough to read a
        hidden value one character at a time from the row count. Refused, the
        request is a 400 before any query runs, whatever the value.
        """
        parts = lookup.split(LOOKUP_SEP)
        if touches_payload(lookup) and not rendering.can_filter_payload(request):
            return False
        if "\x00" in value:
            return False  # PostgreSQL stores no NUL: the query could only fail
        if not REFUSED_LOOKUPS.isdisjoint(parts[1:]):
            return False
        return super().lookup_allowed(lookup, value, request)

    def get_search_fields(self, request: HttpRequest) -> list[str] | tuple[str, ...]:
        """The search fields, never an argument for users who may not filter on them."""
        fields = super().get_search_fields(request)
        if rendering.can_filter_payload(request):
            return fields
        return [field for field in fields if not touches_payload(field)]

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """The row of a detail URL: an ASCII-digit id.

        Anything else is "not found" (Django's redirect with a message), never a 500.
        ``to_field_allowed()`` admits only the primary key: no model points here.
        """
        pk = parse_id(object_id)
        if pk is None or from_field not in (None, self.opts.pk.name):
            return None
        return self.get_queryset(request).filter(pk=pk).first()

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Django's, once the selection holds only ASCII-digit ids.

        Django filters the list on the raw posted values: a forged "²" or "abc"
        would be a 500, and "١٢" would select row 12.
        """
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        kept = [value for value in selected if parse_id(value) is not None]
        if kept != selected:
            post = request.POST.copy()
            post.setlist(helpers.ACTION_CHECKBOX_NAME, kept)
            request.POST = cast("_ImmutableQueryDict", post)
            warn_ignored(self, request, len(selected) - len(kept))
        return super().response_action(request, queryset, *args, **kwargs)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ModelForm[Any]]:
        # The timestamps shown to the second keep the help texts of the fields they stand for.
        kwargs["help_texts"] = {**rendering.time_help_texts(self.model), **kwargs.get("help_texts", {})}
        return super().get_form(request, obj, change, **kwargs)


def requeued_times(count: int) -> str:
    """ "requeued once", "requeued 3 times"."""
    return ngettext("requeued once", "requeued %(count)d times", count) % {"count": count}


def warn_ignored(model_admin: Any, request: HttpRequest, count: int) -> None:
    """Say that posted values which are no row id were left out (a forged form, a stale page)."""
    text = ngettext(
        "%(count)d selected value was ignored: it is not a valid id.",
        "%(count)d selected values were ignored: they are not valid ids.",
        count,
    )
    model_admin.message_user(request, text % {"count": count}, messages.ERROR)


def exact_id(search_term: str) -> int | None:
    """The search term as a row id, when it is ASCII digits that fit a bigint."""
    return parse_id(search_term.strip())
