"""The django-q2 adapter's decisions, in process, without a cluster.

A delivery is simulated the way django-q2's pusher, worker and monitor make
it (tests/integration/django_q2/test_django_q2_cluster.py runs the real thing): the
queue row is locked for ``retry`` seconds, the worker hooks run around the
failing call, then the monitor hook writes the decision.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_q.exceptions import TimeoutException
from django_q.models import OrmQ
from django_q.monitor import save_task
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from django_jobretry import FatalError, deadletters, signals
from django_jobretry.contrib.django_q2 import claims, hooks, monitor, redelivery
from django_jobretry.models import DeadLetter, ImportedFailure, Job
from tests.integration.conftest import cli_run
from tests.jobs_app import q2_tasks
from tests.q2_asserts import pushed, requeued_package

pytestmark = pytest.mark.django_db
TASKS = "tests.jobs_app.q2_tasks"


def deliver(func: Callable[..., Any], error: BaseException | None) -> dict[str, Any]:
    """One delivery of the only queued task; returns the task dict the monitor got."""
    task = pushed()
    hooks.on_pre_execute("django_q", func=func, task=task)
    try:
        if error is not None:
            raise error
        task["success"] = True
    except (Exception, TimeoutException) as exc:
        task["result"], task["success"] = f"{exc} : Traceback", False
        hooks.Reporter(None).report()
    hooks.on_post_execute_in_worker("django_q", func=func, task=task)
    monitor.on_post_execute("django_q", task=task)
    return task


def carried() -> dict[str, Any]:
    state: dict[str, Any] = SignedPackage.loads(OrmQ.objects.get().payload)["jobretry"]
    return state


def test_success_path_changes_nothing() -> None:
    async_task(f"{TASKS}.succeed", "ok")
    row = OrmQ.objects.get()
    before = row.payload
    task: dict[str, Any] = {**SignedPackage.loads(row.payload), "ack_id": row.pk}
    with CaptureQueriesContext(connection) as queries:
        hooks.on_pre_execute("django_q", func=q2_tasks.succeed, task=task)
        task.update(success=True, result="ok")
        hooks.on_post_execute_in_worker("django_q", func=q2_tasks.succeed, task=task)
        monitor.on_post_execute("django_q", task=task)
    assert queries.captured_queries == []  # not even a read
    assert "jobretry" not in task
    assert "ack_failure" not in task  # django-q2 acknowledges it as usual
    assert OrmQ.objects.get().payload == before


def test_a_retry_rewrites_the_queue_row_with_attempt_history_and_delay() -> None:
    async_task(f"{TASKS}.always_fail", "x")
    before = timezone.now()
    task = deliver(q2_tasks.always_fail, ConnectionError("down"))
    after = timezone.now()
    assert task["ack_failure"] is False
    row = OrmQ.objects.get()
    # Policy "q2" retries 0.5 s after the first attempt, counted from when the monitor decided.
    assert before + timedelta(seconds=0.5) <= row.lock <= after + timedelta(seconds=0.5)
    state = carried()
    assert (state["attempt"], state["policy"]) == (2, "q2")
    assert [(e["attempt"], e["kind"], e["delay"], e["message"]) for e in state["errors"]] == [
        (1, "retryable", 0.5, "down")
    ]


def test_give_up_buries_once_and_removes_the_queue_row() -> None:
    sent: list[dict[str, Any]] = []
    signals.job_dead_lettered.connect(lambda **kw: sent.append(kw), weak=False, dispatch_uid="q2-test")
    try:
        task_id = async_task(f"{TASKS}.always_fail", "x", group="g")
        for _ in range(3):
            deliver(q2_tasks.always_fail, ConnectionError("down"))
    finally:
        signals.job_dead_lettered.disconnect(dispatch_uid="q2-test")
    dead = DeadLetter.objects.get()
    assert (dead.external_id, dead.source, dead.attempts, dead.reason) == (
        task_id,
        "django_q2",
        3,
        "exhausted",
    )
    assert not OrmQ.objects.exists()
    assert [(kw["dead_letter_id"], kw["reason"], kw["job_id"]) for kw in sent] == [
        (dead.pk, "exhausted", task_id)
    ]


def test_fatal_and_timeout_are_classified_in_the_worker() -> None:
    async_task(f"{TASKS}.fatal", "f")
    deliver(q2_tasks.fatal, FatalError("bad"))
    assert DeadLetter.objects.get().reason == "fatal"
    async_task(f"{TASKS}.too_slow", "s")
    deliver(q2_tasks.too_slow, TimeoutException())
    assert [(e["kind"], e["ended"]) for e in carried()["errors"]] == [("retryable", "timeout")]


def test_arguments_the_function_cannot_take_are_fatal_at_once_with_the_rule() -> None:
    async_task(f"{TASKS}.succeed", "a", "b")  # succeed(key): the call itself raises the TypeError
    deliver(q2_tasks.succeed, TypeError("succeed() takes 1 positional argument but 2 were given"))
    dead = DeadLetter.objects.get()
    assert (dead.reason, dead.attempts, dead.errors[0]["rule"]) == ("fatal", 1, hooks.ARGUMENTS_RULE)


def test_a_type_error_from_inside_a_task_whose_arguments_fit_is_retried() -> None:
    async_task(f"{TASKS}.always_fail", "x", note=1)
    deliver(q2_tasks.always_fail, TypeError("unsupported operand inside the task"))
    assert [(e["kind"], "rule" in e) for e in carried()["errors"]] == [("retryable", False)]


def test_the_rule_of_a_fatal_error_raised_by_the_task_is_recorded() -> None:
    async_task(f"{TASKS}.fatal", "f")
    deliver(q2_tasks.fatal, FatalError("bad"))
    assert DeadLetter.objects.get().errors[0]["rule"] == "FatalError raised by the job"


def test_an_outcome_after_the_row_was_redelivered_changes_nothing() -> None:
    async_task(f"{TASKS}.always_fail", "x")
    row = OrmQ.objects.get()
    task = SignedPackage.loads(row.payload)
    task.update(ack_id=row.pk, success=False, result="late : Traceback")
    hooks.on_pre_execute("django_q", func=q2_tasks.always_fail, task=task)
    hooks.on_post_execute_in_worker("django_q", func=q2_tasks.always_fail, task=task)
    monitor.on_post_execute("django_q", task=task)  # the row's lock is not in the future
    assert OrmQ.objects.get().payload == row.payload
    assert not DeadLetter.objects.exists()


def test_the_replacement_of_a_killed_worker_counts_the_lost_attempt(tmp_path: Path) -> None:
    async_task(f"{TASKS}.kill_own_worker", "k")
    task = pushed()
    dead_pid = _finished_pid()
    with (
        patch.object(claims, "settled", return_value=tmp_path),
        patch.object(os, "getpid", return_value=dead_pid),
    ):
        hooks.on_pre_execute("django_q", func=q2_tasks.kill_own_worker, task=task)  # then the worker dies
    assert [p.name for p in tmp_path.iterdir()] == [f"{dead_pid}.claim"]
    with patch.object(claims, "settled", return_value=tmp_path):
        claims.recover_lost(sender="django_q", proc_name="Process-2")
        claims.recover_lost(sender="django_q", proc_name="Process-3")  # nothing left to take
    assert list(tmp_path.iterdir()) == []
    state = carried()
    assert state["attempt"] == 2
    assert [(e["ended"], e["delay"]) for e in state["errors"]] == [("worker_exit", 0.5)]


def _finished_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_live_workers_claim_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / f"{os.getppid()}.claim").write_text("{}")
    with patch.object(claims, "settled", return_value=tmp_path):
        claims.recover_lost()
    assert [p.name for p in tmp_path.iterdir()] == [f"{os.getppid()}.claim"]


def test_without_the_reporter_the_result_text_is_a_retryable_failure() -> None:
    verdict = hooks.from_result_text("boom : Traceback (most recent call last):\nValueError: boom\n")
    assert (verdict["kind"], verdict["error_class"], verdict["message"]) == (
        "retryable",
        "ValueError",
        "boom",
    )


def test_policy_per_function() -> None:
    assert hooks.policy_name_for(q2_tasks.always_fail) == "q2"
    assert hooks.policy_name_for(q2_tasks.two_attempts) == "q2-two"
    assert hooks.policy_name_for(q2_tasks.opted_out) is None
    async_task(f"{TASKS}.opted_out", "o")
    task = deliver(q2_tasks.opted_out, ConnectionError("down"))
    assert "jobretry" not in task
    assert "ack_failure" not in task


def bury_one() -> DeadLetter:
    async_task(f"{TASKS}.fatal", "f", group="g")
    deliver(q2_tasks.fatal, FatalError("bad"))
    return DeadLetter.objects.get()


def test_requeue_resubmits_to_django_q2_not_to_our_jobs() -> None:
    dead = bury_one()
    again = deadletters.requeue(dead.pk, actor="ops")
    package = SignedPackage.loads(OrmQ.objects.get().payload)
    requeued_package(again, package, func=f"{TASKS}.fatal", by="ops")
    with pytest.raises(deadletters.NotDead):
        deadletters.requeue(dead.pk)


def test_a_function_django_q2_cannot_locate_is_refused_and_kept() -> None:
    dead = bury_one()
    package = SignedPackage.loads(dead.external_payload)
    package["func"] = f"{TASKS}.renamed_since"
    DeadLetter.objects.filter(pk=dead.pk).update(external_payload=SignedPackage.dumps(package))
    with pytest.raises(deadletters.RequeueConflict, match="cannot locate the function"):
        deadletters.requeue(dead.pk)
    DeadLetter.objects.filter(pk=dead.pk).update(external_payload="tampered")
    result = deadletters.requeue_many([dead.pk])
    assert (result.done, result.conflicts) == ([], [dead.pk])
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert not OrmQ.objects.exists()
    deadletters.discard(dead.pk)
    assert not DeadLetter.objects.exists()


def test_the_admin_filters_by_source_and_requeues(admin_client: Client) -> None:
    dead = bury_one()
    url = reverse("admin:django_jobretry_deadletter_changelist")
    assert str(dead.pk) in admin_client.get(url, {"source": "django_q2"}).content.decode()
    page = admin_client.get(
        reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
    ).content.decode()
    assert dead.external_id in page
    listing = admin_client.get(url, {"source": "jobretry"}).content.decode()
    assert f"/deadletter/{dead.pk}/change/" not in listing
    response = admin_client.post(
        reverse("admin:django_jobretry_deadletter_requeue", args=[dead.pk]), follow=True
    )
    assert "requeued as django_q2 task" in response.content.decode()
    assert OrmQ.objects.count() == 1


def test_the_command_requeues_and_discards_django_q2_dead_letters() -> None:
    dead = bury_one()
    out, _ = cli_run("list")
    assert str(dead.pk) in out
    out, _ = cli_run("requeue", str(dead.pk), "--actor", "alice")
    assert f"requeued dead letter {dead.pk} as job " in out  # the new django-q2 task id
    assert (Job.objects.count(), OrmQ.objects.count()) == (0, 1)
    assert SignedPackage.loads(OrmQ.objects.get().payload)["jobretry"]["requeue_history"][0]["by"] == "alice"
    OrmQ.objects.all().delete()
    other = bury_one()
    cli_run("discard", str(other.pk))
    assert not DeadLetter.objects.exists()


def test_a_burial_counts_as_imported_so_its_failure_row_never_comes_back() -> None:
    dead = bury_one()
    task = SignedPackage.loads(dead.external_payload)
    # django-q2's monitor saves its own Failure row for the same delivery.
    save_task(
        {**task, "success": False, "result": "bad : Traceback", "stopped": timezone.now(), "sync": True}, None
    )
    assert ImportedFailure.objects.filter(source="django_q2", external_id=dead.external_id).exists()
    deadletters.discard(dead.pk)
    out, _ = cli_run("import-django-q2")
    assert "imported 0 of 1" in out
    assert not DeadLetter.objects.exists()


def test_a_redis_retry_still_pending_after_a_switch_to_the_orm_broker_runs() -> None:
    """redeliver() pushes with the cluster's broker, whichever it is now (its Schedule row outlived Redis)."""
    async_task(f"{TASKS}.succeed", "x")
    signed = OrmQ.objects.get().payload
    OrmQ.objects.all().delete()
    assert redelivery.redeliver(signed) == "redelivered"
    assert OrmQ.objects.get().payload == signed
