"""Columns and detail renderings the job and dead-letter pages share.

A dead letter is the job it was, plus how it died: both pages show the
same task, attempt count, histories and stylesheet, from this one place.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest
from django.utils.safestring import SafeString

from django_jobretry.admin import rendering
from django_jobretry.admin.changelist import LightChangeList
from django_jobretry.models import DeadLetter, Job


class JobRecordDisplay:
    """Display methods for a Job or a DeadLetter; mixed into both ModelAdmins.

    Both pages are read-only: state changes only through the services, so
    nothing can be added or edited here (deleting is each admin's own call).
    """

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


def exact_id(search_term: str) -> int | None:
    """The search term as a row id, when it is a number that fits a bigint."""
    term = search_term.strip()
    return int(term) if term.isdigit() and len(term) < 19 else None
