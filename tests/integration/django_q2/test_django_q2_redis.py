"""The django-q2 adapter against a real qcluster on the Redis broker (tests/q2_redis.py).

Tasks are submitted with plain ``async_task`` into the cluster's Redis list.
A retry is a one-off Schedule that the cluster's scheduler fires about every
30 s; so that a test waits for the policy's delays and not for that period,
these tests run the same scheduler function from the test process while
they wait (``wait_ticking``), except the last one, which waits for the
cluster's own scheduler. Counts, orders and final states are asserted;
times only as lower bounds read from stored times.
"""

from __future__ import annotations

import time

import pytest
import redis
from django_q.models import Schedule, Task
from django_q.tasks import async_task

from django_jobretry import deadletters
from django_jobretry.models import DeadLetter, Job
from tests.jobs_app.models import Execution
from tests.processes import wait_until
from tests.q2_asserts import retried_with_growing_delays, runs
from tests.q2_cluster import Cluster
from tests.q2_redis import LIST, NAME, redis_cluster, redis_q2, tick, wait_ticking

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["redis_cluster", "redis_q2"]  # the fixtures, imported for pytest

TASKS = "tests.jobs_app.q2_tasks"
#: Seconds a whole scenario may take before the test fails instead of hanging.
DEADLINE = 45.0


def succeeded(task_id: str) -> None:
    done = Task.objects.filter(id=task_id, success=True)
    wait_ticking(done.exists, timeout=DEADLINE, what=f"task {task_id} to succeed")


def dead_letter_of(task_id: str) -> DeadLetter:
    found = DeadLetter.objects.filter(external_id=task_id)
    wait_ticking(found.exists, timeout=DEADLINE, what=f"the dead letter of {task_id}")
    return found.get()


def nothing_left(client: redis.Redis, key: str, count: int, *, seconds: float = 1.5) -> None:
    """Neither Redis nor a Schedule holds the task, and it runs no more while the scheduler ticks."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tick()
        assert len(runs(key)) == count
        time.sleep(0.1)
    assert (client.llen(LIST), Schedule.objects.count()) == (0, 0)


def test_fails_twice_then_succeeds_with_growing_delays(redis_cluster: Cluster, redis_q2: redis.Redis) -> None:
    task_id = async_task(f"{TASKS}.fail_then_succeed", "twice", 2)
    succeeded(task_id)
    retried_with_growing_delays(task_id, "twice")
    nothing_left(redis_q2, "twice", 3, seconds=0.5)


def test_always_failing_task_is_one_dead_letter_after_max_attempts(
    redis_cluster: Cluster, redis_q2: redis.Redis
) -> None:
    task_id = async_task(f"{TASKS}.always_fail", "always", group="nightly")
    dead = dead_letter_of(task_id)
    assert (dead.source, dead.reason, dead.attempts, dead.max_attempts) == ("django_q2", "exhausted", 3, 3)
    assert (dead.task_name, dead.external_group, dead.queue_name) == (f"{TASKS}.always_fail", "nightly", NAME)
    assert [e["attempt"] for e in dead.errors] == [1, 2, 3]
    assert [e.get("delay") for e in dead.errors] == [0.5, 1.5, None]
    assert dead.last_error == "always always fails"
    nothing_left(redis_q2, "always", 3)
    assert DeadLetter.objects.count() == 1


def test_a_fatal_error_dies_at_once(redis_cluster: Cluster, redis_q2: redis.Redis) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.fatal", "fatal"))
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert [(e["kind"], e["ended"]) for e in dead.errors] == [("fatal", "fatal")]
    nothing_left(redis_q2, "fatal", 1)


def test_a_task_past_its_own_timeout_every_time_ends_as_a_dead_letter(
    redis_cluster: Cluster, redis_q2: redis.Redis
) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.too_slow", "slow", timeout=1))  # the cluster's: 3
    assert (dead.reason, dead.attempts) == ("exhausted", 3)
    assert [e["ended"] for e in dead.errors] == ["timeout"] * 3
    # Every retry kept the task's own timeout, which the worker had popped from the package.
    assert all("(1 seconds)" in e["message"] for e in dead.errors), [e["message"] for e in dead.errors]
    nothing_left(redis_q2, "slow", 3, seconds=0.5)


def test_a_task_that_kills_its_worker_every_time_ends_as_a_dead_letter(
    redis_cluster: Cluster, redis_q2: redis.Redis
) -> None:
    dead = dead_letter_of(async_task(f"{TASKS}.kill_own_worker", "killer"))
    assert (dead.reason, dead.attempts) == ("lease_expired", 3)
    assert [e["ended"] for e in dead.errors] == ["worker_exit"] * 3
    assert [e.get("delay") for e in dead.errors] == [0.5, 1.5, None]
    nothing_left(redis_q2, "killer", 3)


def test_a_requeued_dead_letter_runs_again_through_redis_and_succeeds(
    redis_cluster: Cluster, redis_q2: redis.Redis
) -> None:
    first = dead_letter_of(async_task(f"{TASKS}.fail_until_fixed", "fixme", group="g"))
    Execution.objects.create(key="fixme:fixed", attempt=0, pid=0)  # the fix is deployed
    again = deadletters.requeue(first.pk, actor="ops")
    assert isinstance(again, deadletters.Resubmitted)
    succeeded(again.pk)
    assert len(runs("fixme")) == 4
    assert (DeadLetter.objects.count(), Job.objects.count()) == (0, 0)
    assert Task.objects.get(id=again.pk).group == "g"
    nothing_left(redis_q2, "fixme", 4, seconds=0.5)


def test_the_clusters_own_scheduler_delivers_a_retry(redis_cluster: Cluster, redis_q2: redis.Redis) -> None:
    """No help from the test: the guard runs the scheduler about every 30 s."""
    task_id = async_task(f"{TASKS}.two_attempts", "own")  # policy q2-two: one retry after 0.2 s
    found = DeadLetter.objects.filter(external_id=task_id)
    wait_until(found.exists, timeout=75.0, what="the cluster's scheduler to deliver the retry")
    dead = found.get()
    assert (dead.attempts, [e["attempt"] for e in dead.errors]) == (2, [1, 2])
    first, second = runs("own")
    assert (second.created_at - first.created_at).total_seconds() >= 0.2
    assert (redis_q2.llen(LIST), Schedule.objects.count()) == (0, 0)
