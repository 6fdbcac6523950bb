"""The enqueue's trace on the job and dead-letter pages (issue 36): parsed strictly, linked through TRACE_URL.

The trace id comes from the W3C ``traceparent`` stored on the row, which a
row may hold as anything: only a well-formed header gives an id; anything
else shows nothing, and none of it is echoed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from opentelemetry import trace

from django_jobretry import deadletters
from django_jobretry.admin import rendering
from django_jobretry.models import DeadLetter, Job
from django_jobretry.testing import run_jobs
from tests.integration.conftest import Operator, change_url
from tests.jobs_app import jobs

pytestmark = pytest.mark.django_db

TRACE_URL = "https://traces.example.com/trace/{trace_id}"
#: The marker of the enqueue trace on a page (includes/enqueue_trace.html).
SHOWN = 'class="jobretry-enqueue-trace"'
GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def trace_url() -> Iterator[None]:
    with override_settings(JOBRETRY={**settings.JOBRETRY, "TRACE_URL": TRACE_URL}):
        yield


def traced_enqueue(task: Any, *args: Any) -> tuple[int, str]:
    """Enqueue inside a request-like span: the job's id and the span's trace id (32 hex digits)."""
    with trace.get_tracer("shop").start_as_current_span("POST /checkout") as request:
        job = task.enqueue(*args)
    return job.pk, trace.format_trace_id(request.get_span_context().trace_id)


def page(operator: Operator, obj: Job | DeadLetter) -> str:
    response = operator.get(change_url(obj))
    assert response.status_code == 200
    text: str = response.content.decode()
    return text


@pytest.mark.usefixtures("trace_url")
def test_the_job_page_links_the_enqueuing_requests_trace(superuser: Operator) -> None:
    pk, trace_id = traced_enqueue(jobs.always_fails, "traced")
    run_jobs()  # one failed attempt: the job waits for its next, with that attempt's own trace
    job = Job.objects.get(pk=pk)
    (attempt,) = [entry["trace_id"] for entry in job.errors]
    assert attempt != trace_id  # an attempt is a trace of its own, linked to the enqueue's

    shown = page(superuser, job)
    assert SHOWN in shown
    assert f'href="https://traces.example.com/trace/{trace_id}"' in shown
    assert f'href="https://traces.example.com/trace/{attempt}"' in shown
    assert "the trace of the request or code that enqueued this job" in shown
    assert "not sampled" not in shown


def test_an_unsampled_enqueue_is_shown_and_said_to_be_unsampled(superuser: Operator) -> None:
    """Flags 00: the enqueuing process did not record the trace, so the link most likely finds nothing."""
    plain = jobs.record.enqueue("unsampled")
    Job.objects.filter(pk=plain.pk).update(trace_context={"traceparent": GOOD[:-2] + "00"})
    shown = page(superuser, Job.objects.get(pk=plain.pk))
    assert "<code>0af7651916cd43dd8448eb211c80319c</code>" in shown
    assert "not sampled where it was enqueued" in shown


@pytest.mark.usefixtures("trace_url")
def test_the_dead_letter_page_links_the_enqueuing_requests_trace(viewer: Operator) -> None:
    """A viewer without the payload permission sees it, like the attempts' trace ids: no arguments in it."""
    _, trace_id = traced_enqueue(jobs.always_fails, "traced")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get()

    shown = page(viewer, dead)
    assert SHOWN in shown
    assert f'href="https://traces.example.com/trace/{trace_id}"' in shown


def test_without_trace_url_the_id_is_shown_unlinked(superuser: Operator) -> None:
    pk, trace_id = traced_enqueue(jobs.record, "plain")
    shown = page(superuser, Job.objects.get(pk=pk))
    assert SHOWN in shown
    assert f"<code>{trace_id}</code>" in shown
    assert "href" not in shown.split(SHOWN, 1)[1].split("</span></span>", 1)[0]


@pytest.mark.usefixtures("trace_url")
def test_a_requeued_job_shows_the_original_enqueues_trace_not_the_requeues(superuser: Operator) -> None:
    _, original = traced_enqueue(jobs.always_fails, "requeued")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get()
    with trace.get_tracer("ops").start_as_current_span("POST /admin/requeue") as requeue:
        job = deadletters.requeue(dead.pk, actor="ops")
    assert isinstance(job, Job)
    requeuing = trace.format_trace_id(requeue.get_span_context().trace_id)

    shown = page(superuser, job)
    assert f'href="https://traces.example.com/trace/{original}"' in shown
    assert requeuing not in shown
    assert "the original enqueue's trace: a requeue keeps it" in shown


@pytest.mark.usefixtures("trace_url")
def test_no_stored_trace_shows_nothing(superuser: Operator) -> None:
    plain = jobs.always_fails.enqueue("untraced")  # no active span: no trace context stored
    assert Job.objects.get(pk=plain.pk).trace_context is None
    assert SHOWN not in page(superuser, Job.objects.get(pk=plain.pk))
    run_jobs(include_scheduled=True)
    assert SHOWN not in page(superuser, DeadLetter.objects.get())


HOSTILE = [
    {"traceparent": '00-"><script>alert(1)</script>-b7ad6b7169203331-01'},
    {"traceparent": "<img src=x onerror=alert(1)>"},
    {"traceparent": "javascript:alert(1)//0af7651916cd43dd8448eb211c80319c"},
    {"traceparent": GOOD.upper()},  # W3C: lowercase only
    {"traceparent": "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"},
    {"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"},  # the invalid trace id
    {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"},  # the invalid span id
    {"traceparent": "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01"},  # 30 hex
    {"traceparent": "00-0af7651916cd43dd8448eb211c80319c0-b7ad6b7169203331-01"},  # 33 hex
    {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01"},  # 15 hex span id
    {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1"},
    {"traceparent": "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},  # not version 00
    {"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    {"traceparent": GOOD + "\n"},
    {"traceparent": " " + GOOD},
    {"traceparent": GOOD + "-extra"},
    {"traceparent": "00-\uff10af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},  # a fullwidth digit
    {"traceparent": 7},
    {"traceparent": [GOOD]},
    {"tracestate": "a=b"},  # no traceparent
    {"traceparent": GOOD, "a": 1, "b": 2},  # not a trace context: the worker ignores it too
    [GOOD],
    GOOD,  # a JSON string, not an object
]


@pytest.mark.parametrize("stored", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.usefixtures("trace_url")
def test_a_forged_traceparent_shows_nothing(superuser: Operator, stored: Any) -> None:
    plain = jobs.always_fails.enqueue("forged")
    Job.objects.filter(pk=plain.pk).update(trace_context=stored)
    job_page = page(superuser, Job.objects.get(pk=plain.pk))
    run_jobs(include_scheduled=True)  # carried into the dead letter as it is
    dead = DeadLetter.objects.get()
    assert dead.trace_context == stored
    # Only the attempts' own trace ids are linked (the SDK traces every attempt of the suite).
    attempts = [entry["trace_id"] for entry in dead.errors]
    for shown, links in ((job_page, []), (page(superuser, dead), attempts)):
        assert SHOWN not in shown
        assert shown.count("traces.example.com") == len(links)
        assert "alert(1)" not in shown
        assert "0af7651916cd43dd8448eb211c80319c" not in shown.lower()


@pytest.mark.parametrize(
    "traceparent",
    [
        GOOD.replace("-01", "-0\x00"),
        GOOD + "\x00",
        "\x00" + GOOD,
        GOOD.replace("0af7", "0af\x00"),
    ],
)
def test_a_nul_in_the_traceparent_gives_no_id(traceparent: str) -> None:
    """PostgreSQL's jsonb refuses a NUL, so no row holds one: the parser refuses it all the same."""
    assert rendering.enqueue_trace_id({"traceparent": traceparent}) == ""


def test_the_parser_takes_a_well_formed_traceparent() -> None:
    assert rendering.enqueue_trace_id({"traceparent": GOOD}) == "0af7651916cd43dd8448eb211c80319c"
    assert rendering.enqueue_trace_id({"traceparent": GOOD, "tracestate": "a=b"}) != ""
    assert rendering.enqueue_trace_id(json.dumps({"traceparent": GOOD})) == ""  # text is not a context
    assert rendering.enqueue_trace_id(None) == ""


@pytest.mark.usefixtures("trace_url")
def test_an_all_zero_attempt_trace_id_is_neither_shown_nor_linked(superuser: Operator) -> None:
    """The W3C's invalid trace id, which no tracer writes: a hand-written row, like the enqueue's."""
    jobs.always_fails.enqueue("zero")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get()
    zero = "0" * 32
    forged = [{**entry, "trace_id": zero} for entry in dead.errors]
    DeadLetter.objects.filter(pk=dead.pk).update(errors=forged)
    shown = page(superuser, dead)
    assert zero not in shown
    assert "traces.example.com" not in shown
