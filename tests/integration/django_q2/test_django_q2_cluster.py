"""The django-q2 adapter against a real qcluster (ORM broker) on the test database.

Each test submits with plain ``async_task`` and polls the database with a
hard deadline. Counts, orders and final states are asserted; times only as
the lower bounds the adapter guarantees (a retry is never delivered before
its delay), read from stored times.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django_q.models import OrmQ, Task
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, DeadLetterSource, Job
from tests.jobs_app.models import Execution
from tests.processes import wait_until
from tests.q2_asserts import retried_with_growing_delays, runs
from tests.q2_cluster import Cluster, cluster

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster"]  # the fixture, imported for pytest

TASKS = "tests.jobs_app.q2_tasks"
#: Seconds a whole scenario may take before the test fails instead of hanging.
DEADLINE = 45.0


def succeeded(task_id: str) -> None:
    done = Task.objects.filter(id=task_id, success=True)
    wait_until(done.exists, timeout=DEADLINE, what=f"task {task_id} to succeed")
    # django-q2 saves the result before it acknowledges (deletes) the queue row.
    wait_until(lambda: not OrmQ.objects.exists(), timeout=DEADLINE, what="the acknowledgement")


def dead_letter_of(task_id: str) -> DeadLetter:
    wait_until(
        lambda: DeadLetter.objects.filter(external_id=task_id).exists(), timeout=DEADLINE, what="dead letter"
    )
    return DeadLetter.objects.get(external_id=task_id)


def stays(key: str, count: int, *, seconds: float = 1.5) -> None:
    """No further run of ``key`` during a bounded window (the queue row is already gone)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert len(runs(key)) == count
        time.sleep(0.1)


def test_fails_twice_then_succeeds_with_growing_delays(cluster: Cluster) -> None:
    task_id = async_task(f"{TASKS}.fail_then_succeed", "twice", 2)
    succeeded(task_id)
    retried_with_growing_delays(task_id, "twice")
    assert not OrmQ.objects.exists()


def test_always_failing_task_is_one_dead_letter_after_max_attempts(cluster: Cluster) -> None:
    task_id = async_task(f"{TASKS}.always_fail", "always", note=Decimal("1.5"), group="nightly")
    dead = dead_letter_of(task_id)
    assert (dead.source, dead.reason, dead.attempts, dead.max_attempts) == ("django_q2", "exhausted", 3, 3)
    assert (dead.task_name, dead.external_group, dead.policy_name) == (
        f"{TASKS}.always_fail",
        "nightly",
        "q2",
    )
    assert (dead.args, dead.kwargs) == (["always"], {"note": "Decimal('1.5')"})
    assert (dead.job_id, dead.queue_name) == (0, "jobretry-tests")
    assert [e["attempt"] for e in dead.errors] == [1, 2, 3]
    assert [e.get("delay") for e in dead.errors] == [0.5, 1.5, None]
    assert {e["error_class"] for e in dead.errors} == {"builtins.ConnectionError"}
    assert dead.last_error == "always always fails"
    assert not OrmQ.objects.exists()  # django-q2 has nothing left to deliver
    stays("always", 3)
    assert DeadLetter.objects.count() == 1


def test_a_fatal_error_dies_at_once(cluster: Cluster) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.fatal", "fatal"))
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert [(e["kind"], e["ended"]) for e in dead.errors] == [("fatal", "fatal")]
    assert not OrmQ.objects.exists()
    stays("fatal", 1)


def test_a_task_past_its_timeout_every_time_ends_as_a_dead_letter(cluster: Cluster) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.too_slow", "slow", timeout=1))
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert [e["ended"] for e in dead.errors] == ["timeout"] * 3
    assert len(runs("slow")) == 3
    assert not OrmQ.objects.exists()


def test_a_task_that_kills_its_worker_every_time_ends_as_a_dead_letter(cluster: Cluster) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.kill_own_worker", "killer"))
    assert (dead.reason, dead.attempts) == ("lease_expired", 3)
    assert [e["ended"] for e in dead.errors] == ["worker_exit"] * 3
    assert [e.get("delay") for e in dead.errors] == [0.5, 1.5, None]
    assert not OrmQ.objects.exists()
    stays("killer", 3)


def test_a_requeued_dead_letter_keeps_its_history_and_succeeds_through_the_cluster(cluster: Cluster) -> None:
    first = dead_letter_of(async_task(f"{TASKS}.fail_until_fixed", "fixme", group="g"))
    again = deadletters.requeue(first.pk, actor="ops")
    assert isinstance(again, deadletters.Resubmitted)
    assert not Job.objects.exists()  # never one of our jobs
    second = dead_letter_of(again.pk)  # still broken: dies again, with its past
    assert (second.requeue_count, second.attempts, len(second.errors)) == (1, 3, 6)
    assert second.requeue_history[0]["by"] == "ops"
    assert second.requeue_history[0]["dead_letter_id"] == first.pk
    assert second.external_group == "g"
    Execution.objects.create(key="fixme:fixed", attempt=0, pid=0)  # the fix is deployed
    last = deadletters.requeue(second.pk, actor="ops")
    assert isinstance(last, deadletters.Resubmitted)
    succeeded(last.pk)
    assert len(runs("fixme")) == 7
    assert (DeadLetter.objects.count(), Job.objects.count(), OrmQ.objects.count()) == (0, 0, 0)


def test_retry_policy_overrides_and_opts_out_per_function(cluster: Cluster) -> None:
    overridden = dead_letter_of(async_task(f"{TASKS}.two_attempts", "two"))
    assert (overridden.policy_name, overridden.attempts, overridden.max_attempts) == ("q2-two", 2, 2)

    task_id = async_task(f"{TASKS}.opted_out", "out")
    wait_until(lambda: Task.objects.filter(id=task_id).exists(), timeout=DEADLINE, what="the failure")
    # django-q2's own behaviour: the row stays for redelivery after "retry", untouched by us.
    row = OrmQ.objects.get()
    assert "jobretry" not in SignedPackage.loads(row.payload)
    assert not DeadLetter.objects.filter(source=DeadLetterSource.DJANGO_Q2, external_id=task_id).exists()
