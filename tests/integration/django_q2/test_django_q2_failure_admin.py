"""django-q2's own "Resubmit" on its Failure list refuses the failures the adapter owns.

Against a real qcluster (ORM broker): a task the adapter dead-lettered keeps
django-q2's Failure row, and the Failure admin's action must not put it
back a second time; the requeue through the dead letter runs it once.
Failures the adapter does not own are resubmitted as django-q2 does.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from django_q.models import Failure, OrmQ, Schedule, Task
from django_q.signing import SignedPackage

from django_jobretry import deadletters
from django_jobretry.contrib.django_q2.admin import owned
from django_jobretry.contrib.django_q2.redelivery import REDELIVER
from django_jobretry.models import DeadLetter
from tests.integration.conftest import Operator, messages_of
from tests.jobs_app.models import Execution
from tests.processes import wait_until
from tests.q2_asserts import runs
from tests.q2_cluster import Cluster, cluster

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster"]  # the fixture, imported for pytest

TASKS = "tests.jobs_app.q2_tasks"
DEADLINE = 45.0
FAILURES = reverse("admin:django_q_failure_changelist")


def resubmit(operator: Operator, task_ids: list[str]) -> Any:
    data = {"action": "resubmit_unowned", "_selected_action": task_ids, "index": "0"}
    return operator.post(FAILURES, data, follow=True)


def test_a_dead_lettered_task_is_refused_by_django_q2_resubmit_and_requeued_once(
    cluster: Cluster, superuser: Operator
) -> None:
    from django_q.tasks import async_task

    task_id = async_task(f"{TASKS}.fail_until_fixed", "owned")
    wait_until(lambda: DeadLetter.objects.filter(external_id=task_id).exists(), timeout=DEADLINE, what="dead")
    dead = DeadLetter.objects.get(external_id=task_id)
    assert Failure.objects.filter(id=task_id).exists()  # django-q2's own record of it is kept
    Execution.objects.create(key="owned:fixed", attempt=0, pid=0)  # the fix is deployed

    response = resubmit(superuser, [task_id])
    assert messages_of(response) == [
        "Not resubmitted: 1 of the selected tasks belong to django-jobretry's retries and dead "
        f"letters, and would run twice: {task_id} (dead letter {dead.pk}: requeue it there)."
    ]
    assert (OrmQ.objects.count(), Failure.objects.filter(id=task_id).count()) == (0, 1)

    again = deadletters.requeue(dead.pk, actor="ops")
    assert isinstance(again, deadletters.Resubmitted)
    succeeded = Task.objects.filter(id=again.pk, success=True)
    wait_until(succeeded.exists, timeout=DEADLINE, what="the requeued task to succeed")
    wait_until(lambda: not OrmQ.objects.exists(), timeout=DEADLINE, what="the acknowledgement")

    response = resubmit(superuser, [task_id])  # after the requeue, its old Failure row still refuses
    assert "its dead letter was already requeued or discarded" in messages_of(response)[0]
    assert OrmQ.objects.count() == 0
    assert len(runs("owned")) == 4  # three attempts, then the one requeue: never a fifth


def test_a_failure_the_adapter_does_not_own_is_resubmitted_as_django_q2_does(superuser: Operator) -> None:
    now = timezone.now()
    mine = Failure.objects.create(
        id="0" * 32, name="plain", func=f"{TASKS}.succeed", args=("plain",), kwargs={},
        started=now, stopped=now, success=False, result="boom",
    )  # fmt: skip
    response = resubmit(superuser, [mine.id])
    assert messages_of(response) == []
    assert not Failure.objects.exists()  # django-q2's resubmit deletes the row it sends again
    (queued,) = OrmQ.objects.all()
    assert SignedPackage.loads(queued.payload)["func"] == f"{TASKS}.succeed"


def test_pending_retries_are_owned() -> None:
    """A task in the ORM queue or with a Redis retry Schedule is waiting for another attempt."""
    from django_q.tasks import async_task

    queued = async_task(f"{TASKS}.succeed", "queued")  # no cluster runs: it stays in the queue
    Schedule.objects.create(
        name="jobretry retry " + "a" * 32 + " #2", func=REDELIVER, schedule_type=Schedule.ONCE
    )
    assert owned([queued, "a" * 32, "b" * 32]) == {
        queued: "still in django-q2's queue for another attempt",
        "a" * 32: "waiting for its retry",
    }
