"""What the django-q2 adapter's tests share: a delivery's queue row as the pusher leaves it, and the
assertions of its ORM and Redis broker tests (same outcome, other broker)."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise
from typing import Any

from django.utils import timezone
from django_q.models import OrmQ, Task
from django_q.signing import SignedPackage

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, Job
from tests.jobs_app.models import Execution

#: How long an in-process delivery holds its queue row. django-q2's pusher locks it for
#: Q_CLUSTER["retry"] (6 s in tests/settings.py, for the real clusters), but a loaded machine can
#: take longer than that between the push and the monitor's fence, which would then take the
#: delivery's own outcome for a stale one. No in-process test waits for this lease to pass.
DELIVERY_LEASE = timedelta(hours=1)


def pushed() -> dict[str, Any]:
    """The only queued task as a worker gets it, its row locked by the pusher for DELIVERY_LEASE."""
    row = OrmQ.objects.get()
    OrmQ.objects.filter(pk=row.pk).update(lock=timezone.now() + DELIVERY_LEASE)
    task: dict[str, Any] = {**SignedPackage.loads(row.payload), "ack_id": row.pk}
    return task


def runs(key: str) -> list[Execution]:
    """The runs of the test task called with ``key``, in order (each task function records one)."""
    return list(Execution.objects.filter(key=key).order_by("id"))


def retried_with_growing_delays(task_id: str, key: str) -> None:
    """fail_then_succeed(key, 2) under policy "q2": three runs, never earlier than its delays."""
    made = runs(key)
    assert len(made) == 3
    gaps = [(later.created_at - earlier.created_at).total_seconds() for earlier, later in pairwise(made)]
    # Policy "q2": 0.5 s after attempt 1, 1.5 s after attempt 2; never delivered earlier.
    assert gaps[0] >= 0.5
    assert gaps[1] >= 1.5
    assert Task.objects.get(id=task_id).attempt_count == 3  # one django-q2 task, three attempts
    assert not DeadLetter.objects.exists()


def requeued_package(again: object, package: dict[str, Any], *, func: str, by: str) -> None:
    """A requeue of the dead letter of ``func("f", group="g")``: a new task, attempt 1, provenance."""
    assert isinstance(again, deadletters.Resubmitted)
    assert (again.source, again.requeue_count) == ("django_q2", 1)
    assert (Job.objects.count(), DeadLetter.objects.count()) == (0, 0)
    assert (package["id"], package["func"], package["args"], package["group"]) == (
        again.pk,
        func,
        ("f",),
        "g",
    )
    assert package["jobretry"]["attempt"] == 1
    assert package["jobretry"]["requeue_history"][0]["by"] == by
    assert len(package["jobretry"]["errors"]) == 1
