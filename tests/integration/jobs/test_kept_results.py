"""Results of ``@job`` jobs (docs/results.md): kept on opt-in, read back with ``job.result()``.

Jobs run with ``run_jobs()``, the worker's own handler and recorder, on the
real database; every value is read back from the row.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from django_jobretry import deadletters, job_result
from django_jobretry.exceptions import NoResult, ResultNotReady
from django_jobretry.flows import call, chain
from django_jobretry.jobs.retention import prune_succeeded
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.factories import JobFactory
from tests.jobs_app import flow_jobs, result_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db


def stored(job: Job) -> bool:
    """Whether the row stores a result (SQL NULL: none; a kept None is JSON null)."""
    return Job.objects.filter(pk=job.pk, return_value__isnull=False).exists()


def dead_of(job: Job) -> DeadLetter:
    return DeadLetter.objects.get(job_id=job.pk)


class TestKept:
    def test_the_value_is_read_back_by_the_job_and_by_its_id(self) -> None:
        job = result_jobs.total.enqueue([3, 4, 5])
        assert run_jobs().succeeded == 1
        assert job.result() == {"total": 12, "items": 3}
        assert job_result(job.pk) == {"total": 12, "items": 3}
        assert Job.objects.get(pk=job.pk).return_value == {"total": 12, "items": 3}

    def test_a_task_that_keeps_none_stores_null_and_says_so(self) -> None:
        job = result_jobs.total_not_kept.enqueue([3, 4, 5])
        assert run_jobs().succeeded == 1
        assert not stored(job)
        with pytest.raises(NoResult, match=r"succeeded without keeping its result.*keep_result=True"):
            job.result()

    def test_a_returned_none_is_kept_as_a_result(self) -> None:
        job = result_jobs.nothing.enqueue()
        run_jobs()
        assert stored(job)
        assert job.result() is None

    def test_a_policy_keeps_the_results_of_its_jobs_and_the_task_s_own_option_wins(self) -> None:
        kept, refused = result_jobs.kept_by_policy.enqueue(21), result_jobs.refused_by_task.enqueue(21)
        assert run_jobs().succeeded == 2
        assert kept.result() == 42
        assert not stored(refused)

    def test_pruning_the_job_prunes_its_result(self) -> None:
        job = result_jobs.total.enqueue([1])
        run_jobs()
        Job.objects.filter(pk=job.pk).update(finished_at=Now() - timedelta(days=8))
        assert prune_succeeded(timedelta(days=7)) == 1
        with pytest.raises(NoResult, match=f"no job {job.pk}: never enqueued, or pruned since"):
            job.result()

    def test_a_policy_of_the_settings_keeps_them_too(self, settings: Any) -> None:
        policies = {**settings.JOBRETRY["POLICIES"], "keeping": {"keep_result": True}}
        settings.JOBRETRY = {**settings.JOBRETRY, "POLICIES": policies}
        job = result_jobs.total_not_kept.using(policy="keeping").enqueue([1])
        run_jobs()
        assert job.result() == {"total": 1, "items": 1}


class TestNotYet:
    @pytest.mark.parametrize(
        ("state", "words"),
        [({}, "waiting to run"), ({"retrying": True}, "retrying"), ({"running": True}, "running")],
    )
    def test_an_unfinished_job_has_no_result_yet(self, state: dict[str, bool], words: str) -> None:
        job = JobFactory.create(task_name=result_jobs.total.name, **state)
        with pytest.raises(ResultNotReady, match=f"job {job.pk} .* has not finished: it is {words}"):
            job.result()

    def test_ids_that_name_no_job(self) -> None:
        for missing in (0, -1, 2**63, 10**12):
            with pytest.raises(NoResult, match=f"no job {missing}: never enqueued, or pruned"):
                job_result(missing)
        with pytest.raises(TypeError, match="a job id"):
            job_result("12")  # type: ignore[arg-type]
        with pytest.raises(NoResult, match="unsaved"):
            Job(task_name="t", max_attempts=1).result()


class TestUnstorable:
    def test_a_result_past_the_size_limit_fails_its_only_attempt_naming_the_size_and_the_limit(self) -> None:
        job = result_jobs.text_of.enqueue(70_000)
        assert run_jobs().dead == 1
        dead = dead_of(job)
        assert (dead.reason, dead.attempts, dead.last_error_class) == (
            "fatal",
            1,
            "django_jobretry.exceptions.UnstorableResult",
        )
        assert f"task {result_jobs.text_of.name!r} keeps its result (keep_result=True)" in dead.last_error
        assert "is 70002 bytes as JSON; the limit is 65536 (JOBRETRY['MAX_ARGS_BYTES'])" in dead.last_error
        assert "xxx" not in dead.last_error  # never the value
        assert Execution.objects.filter(key="text_of").count() == 1
        with pytest.raises(NoResult, match=f"is dead letter {dead.pk}"):
            job.result()

    def test_the_limit_is_max_args_bytes(self, settings: Any) -> None:
        settings.JOBRETRY = {**settings.JOBRETRY, "MAX_ARGS_BYTES": 1024}
        small, large = result_jobs.text_of.enqueue(1000), result_jobs.text_of.enqueue(1100)
        run_jobs()
        assert small.result() == "x" * 1000
        assert "the limit is 1024" in dead_of(large).last_error

    def test_a_value_json_has_no_form_for_fails_naming_its_type(self) -> None:
        job = result_jobs.price.enqueue()
        assert run_jobs().dead == 1
        dead = dead_of(job)
        assert (dead.reason, dead.attempts) == ("fatal", 1)
        assert "is a decimal.Decimal, which is not JSON-serialisable" in dead.last_error
        assert "9.99" not in dead.last_error


class TestRequeued:
    def test_the_result_of_a_requeued_job_is_found_by_its_first_id(self) -> None:
        first = result_jobs.fatal_once.enqueue("order-7")
        run_jobs()
        dead = dead_of(first)
        with pytest.raises(NoResult, match="dead letter"):
            first.result()
        again = deadletters.requeue(dead.pk)
        assert isinstance(again, Job)
        assert again.pk != first.pk
        with pytest.raises(ResultNotReady):
            first.result()
        run_jobs()
        assert first.result() == again.result() == job_result(first.pk) == "order-7 done"
        # The later job's own id is no name of the chain: only the first is (as for django.tasks).
        with pytest.raises(NoResult, match=f"no job {again.pk}"):
            job_result(again.pk)


class TestFlowSteps:
    def test_a_step_that_keeps_its_result_stores_it_once_and_reads_it_back(self) -> None:
        flow = chain("kept", call(result_jobs.total, [2, 2]), call(flow_jobs.step, "after")).enqueue()
        run_jobs(include_scheduled=True)
        step = Job.objects.get(flow_step__flow=flow, task_name=result_jobs.total.name)
        assert step.result() == {"total": 4, "items": 2}
        assert Execution.objects.filter(key="after").count() == 1

    def test_a_step_that_keeps_its_result_fails_on_one_it_cannot_keep_though_no_child_reads_it(self) -> None:
        flow = chain("unkept", call(result_jobs.price), call(flow_jobs.step, "after")).enqueue()
        run_jobs(include_scheduled=True)
        dead = DeadLetter.objects.get(flow_step__flow=flow)
        assert dead.reason == "fatal"
        assert "keeps its result (keep_result=True)" in dead.last_error
        assert Job.objects.get(flow_step__flow=flow).status == JobStatus.WAITING
        assert not Execution.objects.filter(key="after").exists()
