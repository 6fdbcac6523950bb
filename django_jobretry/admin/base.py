"""The read-only admin base of the job and dead-letter pages.

A dead letter is the job it was, plus how it died: both pages show the same
task, attempt count, histories and stylesheet, with the same changelist
(light, capped count) and the same rule - nothing is added or edited here,
because state changes only through the services.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.changelist import CappedCountPaginator, LightChangeList
from django_jobretry.models import DeadLetter, Job

if TYPE_CHECKING:  # generic only in django-stubs, not at run time
    _Base = admin.ModelAdmin[Any]
else:
    _Base = admin.ModelAdmin


class ReadOnlyRecordAdmin(_Base):
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
        return rendering.breakable(obj.task_name)

    @admin.display(description="attempts", ordering="attempts")
    def attempts_display(self, obj: Job | DeadLetter) -> str:
        return f"{obj.attempts}/{obj.max_attempts}"

    @admin.display(description="requeues", ordering="requeue_count")
    def requeues(self, obj: Job | DeadLetter) -> int:
        return obj.requeue_count

    @admin.display(description="attempts, oldest first")
    def attempt_history(self, obj: Job | DeadLetter) -> SafeString:
        return rendering.attempt_history(obj.errors, obj.attempts)

    @admin.display(description="requeues")
    def requeue_history_table(self, obj: Job | DeadLetter) -> SafeString:
        return rendering.requeue_history(obj.requeue_history)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LightChangeList

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a dead letter is discarding, which has its own permission and action.
        return False


def exact_id(search_term: str) -> int | None:
    """The search term as a row id, when it is a number that fits a bigint."""
    term = search_term.strip()
    return int(term) if term.isdigit() and len(term) < 19 else None
