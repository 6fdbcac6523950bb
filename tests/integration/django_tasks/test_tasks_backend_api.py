"""JobRetryBackend's django.tasks API: result ids, enqueue options and validation, async entry points.

Django 6+ only (tests/conftest.py leaves this module out on Django 5.2).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as fixed_offset
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.dispatch import receiver
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
from django.tasks.signals import task_enqueued
from django.utils import timezone

from django_jobretry.backends import JobRetryBackend
from django_jobretry.exceptions import InvalidJob
from django_jobretry.jobs import claim
from django_jobretry.models import DeadLetter, Job
from tests.attempts import kill
from tests.jobs_app import jobs, tasks

pytestmark = pytest.mark.django_db

WEST, EAST = fixed_offset(timedelta(hours=-5)), fixed_offset(timedelta(hours=5))

#: ASCII digit -> its full-width twin (U+FF10..U+FF19), which str.isdigit() accepts too.
FULL_WIDTH = {ord(digit): 0xFF10 + int(digit) for digit in "0123456789"}


class TestResultIds:
    @pytest.mark.parametrize(
        "spell",
        [
            pytest.param(lambda real: "abc", id="letters"),
            pytest.param(lambda real: "", id="empty"),
            pytest.param(lambda real: f"-{real}", id="negative"),
            pytest.param(lambda real: "-1", id="minus-one"),
            pytest.param(lambda real: "0", id="zero"),
            pytest.param(lambda real: real.translate(FULL_WIDTH), id="full-width-digits"),
            pytest.param(lambda real: f" {real}", id="leading-space"),
            pytest.param(lambda real: f"{real}\n", id="trailing-newline"),
            pytest.param(lambda real: f"+{real}", id="plus-sign"),
            pytest.param(lambda real: f"0{real}", id="leading-zero"),
            pytest.param(lambda real: f"{real}.0", id="decimal"),
            pytest.param(lambda real: f"{real}_0", id="underscore"),
            pytest.param(lambda real: str(int(real) + 10_000), id="unknown"),
            pytest.param(lambda real: str(2**63 - 1), id="largest-bigint"),
            pytest.param(lambda real: str(2**63), id="past-bigint"),
            pytest.param(lambda real: "9" * 19, id="19-nines"),
            pytest.param(lambda real: "9" * 5000, id="huge"),
        ],
    )
    def test_a_malformed_or_unknown_id_is_a_result_that_does_not_exist(self, spell: Any) -> None:
        real = tasks.flaky.enqueue("k", 0).id
        result_id = spell(real)
        assert result_id != real
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result_id)
        with pytest.raises(TaskResultDoesNotExist):
            tasks.flaky.get_result(result_id)
        assert tasks.flaky.get_result(real).id == real

    def test_the_id_of_a_plain_job_is_not_a_task_result(self) -> None:
        plain = jobs.record.enqueue("k")
        dead = kill(jobs.fatal, key="dead")
        for job_id in (plain.pk, dead.job_id):
            with pytest.raises(TaskResultDoesNotExist, match=r"not a django\.tasks task"):
                default_task_backend.get_result(str(job_id))

    def test_the_result_of_another_task_is_a_mismatch(self) -> None:
        flaky = tasks.flaky.enqueue("k", 0)
        with pytest.raises(TaskResultMismatch, match=r"tests\.jobs_app\.tasks\.flaky"):
            tasks.fatal.get_result(flaky.id)
        assert default_task_backend.get_result(flaky.id).task.func is tasks.flaky.func

    def test_refresh_reads_the_row_again(self) -> None:
        result = tasks.flaky.enqueue("k", 0)
        claim.claim("worker-a", 1, 30, None)
        result.refresh()
        assert (result.status, result.worker_ids) == (TaskResultStatus.RUNNING, ["worker-a"])


class TestAsyncEntryPoints:
    def test_aenqueue_and_aget_result(self) -> None:
        enqueued = async_to_sync(tasks.flaky.aenqueue)("k", failures=1)
        assert enqueued.status == TaskResultStatus.READY
        assert Job.objects.get().pk == int(enqueued.id)
        fetched = async_to_sync(tasks.flaky.aget_result)(enqueued.id)
        assert (fetched.id, fetched.args, fetched.kwargs) == (enqueued.id, ["k"], {"failures": 1})
        with pytest.raises(TaskResultMismatch):
            async_to_sync(tasks.fatal.aget_result)(enqueued.id)
        with pytest.raises(TaskResultDoesNotExist):
            async_to_sync(tasks.flaky.aget_result)("nope")
        claim.claim("worker-a", 1, 30, None)
        async_to_sync(fetched.arefresh)()
        assert fetched.status == TaskResultStatus.RUNNING


class TestEnqueue:
    def test_the_backend_says_what_it_supports(self) -> None:
        backend = task_backends["default"]
        assert isinstance(backend, JobRetryBackend)
        assert (
            backend.supports_defer,
            backend.supports_async_task,
            backend.supports_get_result,
            backend.supports_priority,
        ) == (True, True, True, True)
        assert tasks.flaky.get_backend() is backend

    def test_queue_priority_and_policy_are_stored(self) -> None:
        tasks.other_queue.enqueue("a")
        tasks.flaky.using(priority=-7).enqueue("b", 0)
        rows = {job.args[0]: job for job in Job.objects.all()}
        assert (rows["a"].queue_name, rows["a"].priority) == ("other", 5)
        assert (rows["b"].queue_name, rows["b"].priority) == ("default", -7)
        assert {job.task_name for job in rows.values()} == {
            "tests.jobs_app.tasks.other_queue",
            "tests.jobs_app.tasks.flaky",
        }
        assert {(job.policy_name, job.max_attempts) for job in rows.values()} == {("three", 3)}
        # Higher priority first, as Django documents for task priorities.
        claimed = claim.claim("worker-a", 2, 30, None)
        assert [job.task_name.rsplit(".", 1)[1] for job in claimed] == ["other_queue", "flaky"]

    def test_run_after_defers_the_task(self) -> None:
        later = timezone.now() + timedelta(hours=1)
        result = tasks.flaky.using(run_after=later).enqueue("k", 0)
        job = Job.objects.get()
        assert job.run_at == later
        assert result.status == TaskResultStatus.READY
        assert claim.claim("worker-a", 1, 30, None) == [], "not due before run_after"

    @pytest.mark.parametrize(
        ("args", "kwargs"),
        [
            pytest.param(("k", object()), {}, id="not-json"),
            pytest.param(("k",), {"failures": {1, 2}}, id="a-set"),
            pytest.param(("k", 2**64), {}, id="integer-too-large"),
            pytest.param(("x" * 70_000, 0), {}, id="over-64-kib"),
            pytest.param(("k", float("nan")), {}, id="nan"),
            pytest.param(("k",), {"failures": "\x00"}, id="nul-character"),
        ],
    )
    def test_arguments_that_cannot_be_stored_store_nothing(self, args: tuple[Any, ...], kwargs: Any) -> None:
        sent: list[Any] = []

        @receiver(task_enqueued, weak=False)
        def record(sender: type, **kw: Any) -> None:
            sent.append(kw)

        try:
            with pytest.raises(InvalidJob):
                tasks.flaky.enqueue(*args, **kwargs)
        finally:
            task_enqueued.disconnect(record)
        assert (Job.objects.count(), DeadLetter.objects.count(), sent) == (0, 0, [])

    def test_deep_arguments_store_nothing(self) -> None:
        nested: Any = 0
        for _ in range(200):
            nested = [nested]
        with pytest.raises(InvalidJob, match="deep"):
            tasks.flaky.enqueue("k", nested)
        assert Job.objects.count() == 0

    @pytest.mark.django_db(transaction=True)
    @pytest.mark.parametrize(
        "run_after",
        [
            pytest.param(datetime.max.replace(tzinfo=WEST), id="datetime.max-west-of-utc"),
            pytest.param(datetime.min.replace(tzinfo=EAST), id="datetime.min-east-of-utc"),
        ],
    )
    def test_a_run_after_python_cannot_read_back_is_refused_and_nothing_commits(self, run_after: Any) -> None:
        # Before: the job was inserted, then DataError; the caller's transaction committed it.
        sent: list[Any] = []

        @receiver(task_enqueued, weak=False)
        def record(sender: type, **kw: Any) -> None:
            sent.append(kw)

        try:
            with transaction.atomic():
                with pytest.raises(InvalidJob, match=r"^run_after .* is out of range: this time must be"):
                    tasks.flaky.using(run_after=run_after).enqueue("k", 0)
                tasks.flaky.enqueue("own work", 0)
        finally:
            task_enqueued.disconnect(record)
        assert list(Job.objects.values_list("args", flat=True)) == [["own work", 0]]
        assert len(sent) == 1

    @pytest.mark.parametrize(
        "options",
        [
            pytest.param({"priority": 101}, id="priority-too-high"),
            pytest.param({"queue_name": "not-configured"}, id="queue-not-in-QUEUES"),
            pytest.param({"run_after": timezone.now().replace(tzinfo=None)}, id="naive-run-after"),
        ],
    )
    def test_invalid_options_are_refused_before_anything_is_stored(self, options: dict[str, Any]) -> None:
        with pytest.raises(InvalidTask):
            tasks.flaky.using(**options).enqueue("k", 0)
        assert Job.objects.count() == 0


def test_a_using_copy_does_not_change_the_task_other_results_report() -> None:
    """get_result().task is the task as each result was enqueued; a .using() copy changes no other."""
    copied = tasks.other_queue.using(priority=-5).enqueue("copy")
    plain = tasks.other_queue.enqueue("plain")
    assert tasks.other_queue.get_result(copied.id).task == tasks.other_queue.using(priority=-5)
    assert tasks.other_queue.get_result(plain.id).task is tasks.other_queue
    assert Job.objects.get(pk=int(copied.id)).priority == -5
