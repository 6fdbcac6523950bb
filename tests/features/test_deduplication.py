"""Step definitions for deduplication.feature: enqueues and an in-process worker on the real database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from pytest_bdd import given, parsers, scenarios, then, when

from django_jobretry.models import Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.jobs_app import unique_jobs
from tests.jobs_app.models import Execution

pytestmark = pytest.mark.django_db

scenarios("deduplication.feature")


@pytest.fixture
def returned() -> list[Job]:
    """What each enqueue of the scenario returned, in order."""
    return []


@given(parsers.parse("the invoice of order {order:d} is enqueued twice"))
def invoice_twice(order: int, returned: list[Job]) -> None:
    returned += [unique_jobs.invoice.enqueue(order), unique_jobs.invoice.enqueue(order_id=order)]


@when(parsers.parse("the invoice of order {order:d} is enqueued again"))
def invoice_again(order: int, returned: list[Job]) -> None:
    returned.append(unique_jobs.invoice.enqueue(order))


@then("1 invoice job exists and both enqueues returned it")
def one_invoice(returned: list[Job]) -> None:
    (only,) = Job.objects.filter(task_name=unique_jobs.invoice.name)
    assert [job.pk for job in returned] == [only.pk, only.pk]


@when("the worker runs the due jobs")
def worker_runs() -> None:
    run_jobs()


@then("the invoice ran 1 time and the enqueue returned the finished job")
def invoice_ran_once(returned: list[Job]) -> None:
    assert Execution.objects.filter(key__startswith="invoice-").count() == 1
    assert returned[-1].pk == returned[0].pk
    assert returned[-1].status == JobStatus.SUCCEEDED


@when(parsers.parse("the invoice job finished {minutes:d} minutes ago by the database clock"))
def finished_long_ago(minutes: int) -> None:
    Job.objects.filter(task_name=unique_jobs.invoice.name).update(
        finished_at=Now() - timedelta(minutes=minutes)
    )


@then(parsers.parse("{count:d} invoice jobs exist"))
def invoice_jobs(count: int) -> None:
    assert Job.objects.filter(task_name=unique_jobs.invoice.name).count() == count


@given(parsers.parse('a sync of tenant {tenant:d} since "{since}" is enqueued'))
@when(parsers.parse('a sync of tenant {tenant:d} since "{since}" is enqueued'))
def sync(tenant: int, since: str) -> None:
    unique_jobs.sync.enqueue(tenant, since)


@then(parsers.parse('the sync ran 1 time, since "{since}"'))
def sync_ran_once(since: str) -> None:
    assert list(Execution.objects.filter(key__startswith="sync-").values_list("key", flat=True)) == [
        f"sync-3-{since}"
    ]
