"""The django-q2 adapter on the Redis broker, in process: the real Redis server, no cluster.

A delivery is simulated the way django-q2's pusher, worker and monitor make
it on Redis (tests/integration/django_q2/test_django_q2_redis.py runs the real
thing): the package is popped from the list (nothing is left in Redis, no
``ack_id``), the worker hooks run around the call, the monitor pops
``ack_id`` and sends ``post_execute``. Retries are Schedule rows; the
scheduler is run here by hand.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q import scheduler
from django_q.exceptions import TimeoutException
from django_q.models import Schedule
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from django_jobretry import FatalError, deadletters
from django_jobretry.contrib.django_q2 import claims, hooks, monitor, redelivery
from django_jobretry.models import DeadLetter
from tests.jobs_app import q2_tasks
from tests.q2_asserts import requeued_package
from tests.q2_redis import LIST, NAME, redis_q2, tick

pytestmark = pytest.mark.django_db
__all__ = ["redis_q2"]  # the fixture, imported for pytest
TASKS = "tests.jobs_app.q2_tasks"


@pytest.fixture(autouse=True)
def in_process(redis_q2: redis.Redis, tmp_path: Path) -> Iterator[None]:
    """Claims in a directory of the test's own; the scheduler keeps the test's connection.

    django-q2's scheduler closes "old" connections first, which inside the
    test's transaction would end it; the cluster tests run it unpatched.
    """
    with (
        patch.object(claims, "settled", return_value=tmp_path),
        patch.object(scheduler, "close_old_django_connections"),
    ):
        yield


def deliver(func: Callable[..., Any], error: BaseException | None, client: redis.Redis) -> dict[str, Any]:
    """Pop the next package and run it through the hooks as a Redis cluster would."""
    raw = client.lpop(LIST)
    assert raw is not None, "nothing queued"
    task: dict[str, Any] = SignedPackage.loads(raw)
    task.update(cluster=NAME, ack_id=None)  # the pusher
    task.pop("timeout", None)  # the worker, before pre_execute
    hooks.on_pre_execute("django_q", func=func, task=task)
    try:
        if error is not None:
            raise error
        task.update(success=True, result="ok")
    except (Exception, TimeoutException) as exc:
        task["result"], task["success"] = f"{exc} : Traceback", False
        hooks.Reporter(None).report()
    hooks.on_post_execute_in_worker("django_q", func=func, task=task)
    task.pop("ack_id")  # the monitor
    monitor.on_post_execute("django_q", task=task)
    return task


def scheduled() -> dict[str, Any]:
    """The package the only retry Schedule carries."""
    row = Schedule.objects.get()
    package: dict[str, Any] = SignedPackage.loads(ast.literal_eval(row.args))
    return package


def fire(client: redis.Redis) -> None:
    """Make the retry due, let the scheduler push its task, and run that task (redeliver)."""
    Schedule.objects.update(next_run=timezone.now() - timedelta(seconds=1))
    tick()
    redelivery_task = SignedPackage.loads(client.lpop(LIST))
    assert redelivery_task["func"] == redelivery.REDELIVER
    assert redelivery.redeliver(*redelivery_task["args"]) == "redelivered"


def test_the_success_path_makes_no_query(redis_q2: redis.Redis, tmp_path: Path) -> None:
    async_task(f"{TASKS}.succeed", "ok")
    with CaptureQueriesContext(connection) as queries:
        task = deliver(q2_tasks.succeed, None, redis_q2)
    assert queries.captured_queries == []
    assert "jobretry" not in task
    assert list(tmp_path.iterdir()) == []  # the claim was written and removed
    assert (redis_q2.llen(LIST), Schedule.objects.count()) == (0, 0)


def test_a_retry_is_one_schedule_that_puts_the_package_back_once(redis_q2: redis.Redis) -> None:
    task_id = async_task(f"{TASKS}.always_fail", "x", group="g")
    before = timezone.now()
    deliver(q2_tasks.always_fail, ConnectionError("down"), redis_q2)
    after = timezone.now()
    assert redis_q2.llen(LIST) == 0  # nothing in Redis while the retry waits
    row = Schedule.objects.get()
    assert (row.func, row.schedule_type, row.repeats, row.cluster) == (
        redelivery.REDELIVER,
        Schedule.ONCE,
        -1,
        NAME,
    )
    # Policy "q2" retries 0.5 s after the first attempt, counted from when the monitor decided.
    assert before + timedelta(seconds=0.5) <= row.next_run <= after + timedelta(seconds=0.5)
    package = scheduled()
    assert (package["id"], package["args"], package["group"]) == (task_id, ("x",), "g")
    assert not {"result", "success", "stopped", "ack_id"} & set(package)
    state = package["jobretry"]
    assert (state["attempt"], state["policy"]) == (2, "q2")
    assert [(e["attempt"], e["delay"], e["message"]) for e in state["errors"]] == [(1, 0.5, "down")]
    assert not {"failure", "ack_id"} & set(state)

    tick()  # not due yet
    assert (Schedule.objects.count(), redis_q2.llen(LIST)) == (1, 0)
    signed = ast.literal_eval(row.args)
    fire(redis_q2)
    assert not Schedule.objects.exists()  # a ONCE schedule is gone once fired
    assert redelivery.redeliver(signed) == "duplicate_dropped"  # the scheduler pushing it twice
    (again,) = redis_q2.lrange(LIST, 0, -1)
    assert SignedPackage.loads(again)["jobretry"]["attempt"] == 2


def test_giving_up_is_one_dead_letter_and_nothing_left_anywhere(redis_q2: redis.Redis) -> None:
    task_id = async_task(f"{TASKS}.always_fail", "x", group="g")
    for attempt in (1, 2):
        deliver(q2_tasks.always_fail, ConnectionError(f"down {attempt}"), redis_q2)
        fire(redis_q2)
    deliver(q2_tasks.always_fail, ConnectionError("down 3"), redis_q2)
    dead = DeadLetter.objects.get()
    assert (dead.external_id, dead.source, dead.reason, dead.attempts) == (
        task_id,
        "django_q2",
        "exhausted",
        3,
    )
    assert (dead.queue_name, dead.external_group, dead.args) == (NAME, "g", ["x"])
    assert [e.get("delay") for e in dead.errors] == [0.5, 1.5, None]
    assert [e["message"] for e in dead.errors] == ["down 1", "down 2", "down 3"]
    assert (redis_q2.llen(LIST), Schedule.objects.count()) == (0, 0)


def test_a_fatal_error_is_buried_at_once(redis_q2: redis.Redis) -> None:
    async_task(f"{TASKS}.fatal", "f")
    deliver(q2_tasks.fatal, FatalError("bad"), redis_q2)
    assert (DeadLetter.objects.get().reason, Schedule.objects.count()) == ("fatal", 0)


def _worker(task: dict[str, Any], timeout: int) -> None:
    """Stands in for django_q.worker.worker: pops the task's timeout, then sends pre_execute."""
    timer_value = task.pop("timeout", timeout)  # noqa: F841 - read from this frame by the hook
    hooks.on_pre_execute("django_q", func=q2_tasks.too_slow, task=task)


@pytest.mark.parametrize(("own", "kept"), [(1, {"timeout": 1}), (3, {}), (None, {})])
def test_a_tasks_own_timeout_travels_with_its_retry(
    redis_q2: redis.Redis, own: int | None, kept: dict[str, int]
) -> None:
    async_task(f"{TASKS}.too_slow", "s", **({} if own is None else {"timeout": own}))
    task: dict[str, Any] = {**SignedPackage.loads(redis_q2.lpop(LIST)), "cluster": NAME, "ack_id": None}
    with patch("django_q.worker.worker", _worker):
        _worker(task, 3)  # the cluster's timeout is 3
    task.update(success=False, result="late : Traceback")
    hooks.on_post_execute_in_worker("django_q", func=q2_tasks.too_slow, task=task)
    monitor.on_post_execute("django_q", task=task)
    assert {key: value for key, value in scheduled().items() if key == "timeout"} == kept


def _finished_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_killed_workers_claim_carries_the_package_for_its_retry(
    redis_q2: redis.Redis, tmp_path: Path
) -> None:
    task_id = async_task(f"{TASKS}.kill_own_worker", "k")
    task: dict[str, Any] = {**SignedPackage.loads(redis_q2.lpop(LIST)), "cluster": NAME, "ack_id": None}
    dead_pid = _finished_pid()
    with patch.object(os, "getpid", return_value=dead_pid):
        hooks.on_pre_execute("django_q", func=q2_tasks.kill_own_worker, task=task)  # then the worker dies
    claims.recover_lost(sender="django_q", proc_name="Process-2")
    claims.recover_lost(sender="django_q", proc_name="Process-3")  # nothing left to take
    assert list(tmp_path.iterdir()) == []
    package = scheduled()
    assert (package["id"], package["args"], package["jobretry"]["attempt"]) == (task_id, ("k",), 2)
    assert [(e["ended"], e["delay"]) for e in package["jobretry"]["errors"]] == [("worker_exit", 0.5)]


def test_a_claim_is_kept_when_recording_fails_and_dropped_when_unsigned(
    redis_q2: redis.Redis, tmp_path: Path
) -> None:
    async_task(f"{TASKS}.kill_own_worker", "k")
    task: dict[str, Any] = {**SignedPackage.loads(redis_q2.lpop(LIST)), "cluster": NAME, "ack_id": None}
    dead_pid = _finished_pid()
    with patch.object(os, "getpid", return_value=dead_pid):
        hooks.on_pre_execute("django_q", func=q2_tasks.kill_own_worker, task=task)
    with patch.object(monitor, "record_failure", side_effect=ConnectionError("database down")):
        claims.recover_lost()
    assert [p.name for p in tmp_path.iterdir()] == [f"{dead_pid}.claim"]  # the only copy: kept
    claim = tmp_path / f"{dead_pid}.claim"
    claim.write_text(claim.read_text().replace('"package": "', '"package": "x'))
    claims.recover_lost()
    assert (list(tmp_path.iterdir()), Schedule.objects.count()) == ([], 0)


def test_requeue_pushes_the_task_back_on_its_redis_list(redis_q2: redis.Redis) -> None:
    async_task(f"{TASKS}.fatal", "f", group="g")
    deliver(q2_tasks.fatal, FatalError("bad"), redis_q2)
    dead = DeadLetter.objects.get()
    again = deadletters.requeue(dead.pk, actor="ops")
    (raw,) = redis_q2.lrange(LIST, 0, -1)
    requeued_package(again, SignedPackage.loads(raw), func=f"{TASKS}.fatal", by="ops")
