"""JOBRETRY["MIDDLEWARE"] around attempts run by ``django_jobretry.testing.run_jobs``.

The chain is the one worker runners and process-pool children call
(worker/runner.py ``run_handler``); the same middleware under real worker
processes: test_middleware_workers.py.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobretry.conf import jobretry_settings
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

MW = "tests.jobs_app.middleware"


def middleware(*names: str) -> override_settings:
    return override_settings(JOBRETRY={**settings.JOBRETRY, "MIDDLEWARE": [f"{MW}.{name}" for name in names]})


def keys(job_id: int) -> list[str]:
    """The rows the middleware and the job wrote for ``job_id``, in order, without the job id."""
    rows = Execution.objects.filter(key__endswith=f":{job_id}").order_by("id").values_list("key", flat=True)
    return [key.rpartition(":")[0] for key in rows]


def test_the_first_listed_is_the_outermost_and_sees_the_outcome() -> None:
    ok = jobs.record.enqueue("ordered")
    failing = jobs.always_fails.enqueue("reset")
    with middleware("outer", "inner"):
        summary = run_jobs()
    assert (summary.succeeded, summary.retried) == (1, 1)
    assert keys(ok.pk) == ["outer:enter", "inner:enter", "inner:returned", "outer:returned"]
    # The function ran once, inside the innermost layer.
    rows = list(Execution.objects.order_by("id").values_list("key", flat=True))
    assert rows[rows.index(f"inner:enter:{ok.pk}") + 1] == "ordered"
    assert rows.count("ordered") == 1
    reset = "ConnectionResetError"
    assert keys(failing.pk) == ["outer:enter", "inner:enter", f"inner:{reset}", f"outer:{reset}"]
    assert Job.objects.get(pk=failing.pk).errors[0]["error_class"] == f"builtins.{reset}"


def test_a_middleware_that_raises_fails_the_attempt_with_its_traceback_and_others_run() -> None:
    before = jobs.noop.enqueue()
    after = jobs.takes_anything.enqueue("x")
    other = jobs.record.enqueue("unharmed")
    with middleware("broken"):
        summary = run_jobs()
    assert (summary.succeeded, summary.retried) == (1, 2)
    for job_id, where in ((before.pk, "before"), (after.pk, "after")):
        row = Job.objects.get(pk=job_id)
        assert (row.status, row.attempts, len(row.errors)) == (JobStatus.READY, 1, 1)
        entry = row.errors[0]
        assert entry["error_class"] == "builtins.RuntimeError"
        assert entry["message"] == f"broken middleware {where} call_next"
        assert entry["traceback"].startswith("Traceback (most recent call last):")
        assert 'middleware.py", line' in entry["traceback"]
        assert "in broken" in entry["traceback"]
    assert Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED
    assert Execution.objects.filter(key="unharmed").count() == 1


def test_a_middleware_can_classify_a_retryable_error_as_fatal() -> None:
    reset = jobs.always_fails.enqueue("fatal-now")
    with middleware("fatal_on_reset"):
        summary = run_jobs(include_scheduled=True)
    assert (summary.dead, summary.total) == (1, 1)
    dead = DeadLetter.objects.get(job_id=reset.pk)
    assert (dead.reason, dead.attempts) == ("fatal", 1)
    assert dead.last_error_class == "django_jobretry.exceptions.FatalError"
    assert "ConnectionResetError" in dead.errors[0]["traceback"]  # the cause is kept


def test_without_the_middleware_the_same_job_is_retried_until_exhausted() -> None:
    reset = jobs.always_fails.enqueue("control")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get(job_id=reset.pk)
    assert (dead.reason, dead.attempts) == ("exhausted", 3)


def test_a_middleware_that_does_not_call_next_skips_the_function_and_succeeds() -> None:
    skipped = jobs.record.enqueue("skipped")
    with middleware("skips"):
        summary = run_jobs()
    assert summary.succeeded == 1
    assert Job.objects.get(pk=skipped.pk).status == JobStatus.SUCCEEDED
    assert not Execution.objects.filter(key="skipped").exists()


def test_the_chain_is_imported_once_and_again_after_a_settings_change() -> None:
    with middleware("outer"):
        first = jobretry_settings.middleware
        assert jobretry_settings.middleware is first
        assert [m.__qualname__ for m in first] == ["_recording.<locals>.middleware"]
    with middleware():
        assert jobretry_settings.middleware == ()


def test_a_base_exception_from_a_middleware_ends_that_attempt_only() -> None:
    aborted = jobs.noop.enqueue()
    other = jobs.record.enqueue("after-abort")
    with middleware("aborts"):
        summary = run_jobs()
    assert (summary.succeeded, summary.retried) == (1, 1)
    row = Job.objects.get(pk=aborted.pk)
    assert (row.status, row.attempts) == (JobStatus.READY, 1)
    assert (row.errors[0]["ended"], row.errors[0]["error_class"]) == (
        "worker_exit",
        "tests.jobs_app.middleware.Abort",
    )
    assert "in aborts" in row.errors[0]["traceback"]
    assert Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED
