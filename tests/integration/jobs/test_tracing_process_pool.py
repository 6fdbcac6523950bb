"""Under ``runworker --pool process`` a failed attempt keeps its trace id too (issue 36).

The attempt's span runs in the child process; its trace id must come back
to the worker, which writes the history entry the admin links from. The
worker and its children get an SDK from tests/jobs_app/apps.py when
JOBRETRY_TEST_OTEL is set, as a project's AppConfig.ready() would do.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from opentelemetry import trace

from django_jobretry.admin.rendering import TRACE_ID
from django_jobretry.models import DeadLetter
from tests.integration.conftest import Operator
from tests.jobs_app import jobs
from tests.processes import Workers, finish, spawn

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_failed_attempt_in_a_child_process_keeps_its_trace_id(
    workers: Workers, superuser: Operator
) -> None:
    with trace.get_tracer("shop").start_as_current_span("POST /checkout"):
        jobs.always_fails.enqueue("pooled")  # policy "three": three attempts, then a dead letter
    worker = spawn(
        workers, "--pool", "process", "--concurrency", "1", "--max-jobs", "3", env={"JOBRETRY_TEST_OTEL": "1"}
    )
    code, output = finish(worker, timeout=90)
    assert code == 0, output
    dead = DeadLetter.objects.get()
    trace_ids = [entry.get("trace_id", "") for entry in dead.errors]
    assert len(trace_ids) == 3, dead.errors
    assert all(TRACE_ID.fullmatch(trace_id) for trace_id in trace_ids), trace_ids
    assert len(set(trace_ids)) == 3  # an attempt is a trace of its own
    page = superuser.get(reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])).content.decode()
    assert all(f"<code>{trace_id}</code>" in page for trace_id in trace_ids)
