"""django-q2's "Resubmit" action on its Failure list, refused for the failures the adapter owns.

django-q2 keeps a ``Failure`` row for every failed task, the adapter's too,
and its admin action resubmits any of them unguarded. A failure the adapter
has taken over is a dead letter (or was one: requeued, discarded) or is
waiting for its retry; resubmitting it there as well would run the task
twice. So the Failure admin's action is replaced with one that resubmits the
others as django-q2 does and names the refused ones, pointing to the dead
letter. The ``Failure`` rows themselves are kept: ``fetch()``, ``result()``
and django-q2's list still show the failure.

Owned, by task id: a task the adapter (or the import) recorded in
``ImportedFailure`` or that has a django-q2 dead letter; a task still in the
ORM broker's queue; a task with a pending Redis retry (its ``Schedule``).
The swap happens only where the Failure admin is django-q2's own; a project
that registers its own keeps its admin, and can use
:func:`resubmit_unowned` as its action.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpRequest

from django_jobretry.contrib.django_q2.failure_rows import QueueWatch
from django_jobretry.contrib.django_q2.redelivery import REDELIVER
from django_jobretry.deadletters.external import known
from django_jobretry.models import DeadLetter, DeadLetterSource

SOURCE = DeadLetterSource.DJANGO_Q2.value


def owned(task_ids: Iterable[str]) -> dict[str, str]:
    """Which of ``task_ids`` the adapter owns, each with why (what the operator should do instead)."""
    from django_q.models import Schedule

    ids = [str(task_id) for task_id in task_ids]
    if not ids:
        return {}
    imported, dead = known(SOURCE, ids)
    letters = dict(
        DeadLetter.objects.filter(source=SOURCE, external_id__in=ids).values_list("external_id", "pk")
    )
    why: dict[str, str] = {}
    for task_id in sorted(imported | dead):
        letter = letters.get(task_id)
        why[task_id] = (
            f"dead letter {letter}: requeue it there"
            if letter is not None
            else "its dead letter was already requeued or discarded"
        )
    for task_id in sorted(set(ids) & QueueWatch().current()):
        why.setdefault(task_id, "still in django-q2's queue for another attempt")
    scheduled = Q()
    for task_id in ids:
        scheduled |= Q(name__startswith=f"jobretry retry {task_id} #")
    for name in Schedule.objects.filter(scheduled, func=REDELIVER).values_list("name", flat=True):
        task_id = name.removeprefix("jobretry retry ").partition(" #")[0]
        why.setdefault(task_id, "waiting for its retry")
    return why


@admin.action(description="Resubmit selected tasks to queue")
def resubmit_unowned(model_admin: Any, request: HttpRequest, queryset: Any) -> None:
    """django-q2's resubmit for the selected failures the adapter does not own; the rest named."""
    from django_q.admin import resubmit_task

    refused = owned(queryset.values_list("id", flat=True))
    resubmit_task(model_admin, request, queryset.exclude(id__in=list(refused)))
    if refused:
        named = "; ".join(f"{task_id} ({why})" for task_id, why in sorted(refused.items()))
        model_admin.message_user(
            request,
            f"Not resubmitted: {len(refused)} of the selected tasks belong to django-jobretry's "
            f"retries and dead letters, and would run twice: {named}.",
            messages.WARNING,
        )


def guard_failure_admin(site: admin.AdminSite) -> bool:
    """Swap django-q2's own Failure admin on ``site`` for the guarded one; False when it is not there."""
    from django_q.admin import FailAdmin
    from django_q.models import Failure

    current = site._registry.get(Failure)
    if type(current) is not FailAdmin:
        return False

    class GuardedFailAdmin(FailAdmin):  # type: ignore[misc]  # django-q2 has no type hints
        actions = [resubmit_unowned]

    site.unregister(Failure)
    site.register(Failure, GuardedFailAdmin)
    return True


if apps.is_installed("django_q"):  # otherwise check E032 says so, and there is nothing to guard
    import django_q.admin  # noqa: F401 - registers django-q2's admin first, whatever the app order

    guard_failure_admin(admin.site)
