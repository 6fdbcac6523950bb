"""OpenTelemetry (issue 24, part 3): a producer span per enqueue, a consumer span per attempt, linked.

Spans are read from the SDK every test process runs with (tests/otel_sdk.py),
recorded only while a test here asks for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from django_jobretry import job
from django_jobretry.conf.schema import validate
from django_jobretry.jobs import tracing
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.integration.conftest import Operator
from tests.jobs_app import jobs
from tests.otel_sdk import RECORDING

pytestmark = pytest.mark.django_db

TRACE_URL = "https://traces.example.com/trace/{trace_id}"


@pytest.fixture
def spans() -> Iterator[list[ReadableSpan]]:
    """The spans that end during the test (tests/otel_sdk.py installed the SDK in this process)."""
    RECORDING.spans, RECORDING.on = [], True
    try:
        yield RECORDING.spans
    finally:
        RECORDING.on = False


def named(spans: list[ReadableSpan], kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in spans if span.kind is kind]


def test_three_attempts_are_three_consumer_spans_linked_to_the_enqueue(spans: list[ReadableSpan]) -> None:
    with trace.get_tracer("shop").start_as_current_span("checkout") as checkout:
        enqueued = jobs.flaky.enqueue("traced", 2)
    stored = Job.objects.get(pk=enqueued.pk).trace_context
    assert set(stored) == {"traceparent"}  # no baggage, no tracestate when none was set

    run_jobs(include_scheduled=True)
    assert Job.objects.get(pk=enqueued.pk).status == JobStatus.SUCCEEDED

    (producer,) = named(spans, SpanKind.PRODUCER)
    assert producer.name == "send default"
    assert producer.parent is not None
    assert producer.parent.span_id == checkout.get_span_context().span_id
    assert producer.attributes is not None
    assert producer.attributes["messaging.message.id"] == str(enqueued.pk)
    consumers = named(spans, SpanKind.CONSUMER)
    assert [span.name for span in consumers] == ["process default"] * 3
    for number, span in enumerate(consumers, start=1):
        assert [link.context.span_id for link in span.links] == [producer.context.span_id]
        assert span.attributes is not None
        assert {key: span.attributes[key] for key in ATTRIBUTES} == {
            "messaging.system": "django_jobretry",
            "messaging.operation.type": "process",
            "messaging.destination.name": "default",
            "messaging.message.id": str(enqueued.pk),
            "django_jobretry.attempt": number,
            "django_jobretry.task": jobs.flaky.name,
        }
    failed, succeeded = consumers[:2], consumers[2]
    for span in failed:
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert (
            span.attributes["error.type"] == "django_jobretry.exceptions.RetryableError"
        )  # as in the history
        assert span.attributes["django_jobretry.error_kind"] == "retryable"
        assert [event.name for event in span.events] == ["exception"]
    assert succeeded.status.status_code is StatusCode.UNSET
    assert "error.type" not in (succeeded.attributes or {})
    # Each failed attempt's history entry keeps its span's trace id.
    errors = Job.objects.get(pk=enqueued.pk).errors
    assert [entry.get("trace_id") for entry in errors] == [
        trace.format_trace_id(span.context.trace_id) for span in failed
    ]


ATTRIBUTES = (
    "messaging.system",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
    "django_jobretry.attempt",
    "django_jobretry.task",
)


def test_a_fatal_error_is_marked_fatal(spans: list[ReadableSpan]) -> None:
    jobs.fatal.enqueue("traced")
    run_jobs()
    (consumer,) = named(spans, SpanKind.CONSUMER)
    assert consumer.attributes is not None
    assert consumer.attributes["django_jobretry.error_kind"] == "fatal"
    assert consumer.links == ()  # enqueued outside any span: nothing to link to
    assert Job.objects.count() == 0


def test_bulk_enqueue_is_one_producer_span_for_the_batch(spans: list[ReadableSpan]) -> None:
    with trace.get_tracer("shop").start_as_current_span("import"):
        created = jobs.record.bulk_enqueue([((f"k{i}",), {}) for i in range(3)])
    (producer,) = named(spans, SpanKind.PRODUCER)
    assert producer.attributes is not None
    assert producer.attributes["messaging.batch.message_count"] == 3
    contexts = {json.dumps(job.trace_context, sort_keys=True) for job in Job.objects.all()}
    assert len(contexts) == 1
    assert {job.pk for job in created} == set(Job.objects.values_list("pk", flat=True))


def test_without_an_active_span_nothing_is_stored_or_made(spans: list[ReadableSpan]) -> None:
    enqueued = jobs.record.enqueue("plain")
    assert Job.objects.get(pk=enqueued.pk).trace_context is None
    assert named(spans, SpanKind.PRODUCER) == []


@pytest.mark.parametrize(
    "stored",
    [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"traceparent": 7}),
        json.dumps({"traceparent": "00-zz-zz-01"}),
        json.dumps({"traceparent": "x" * 10_000}),
        json.dumps(
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "a": 1, "b": 2}
        ),
    ],
)
def test_a_hostile_stored_context_costs_only_the_link(spans: list[ReadableSpan], stored: str) -> None:
    enqueued = jobs.record.enqueue("hostile")
    Job.objects.filter(pk=enqueued.pk).update(
        trace_context=json.loads(stored) if stored != "not json" else stored
    )
    summary = run_jobs()
    assert summary.total == 1
    assert Job.objects.get(pk=enqueued.pk).status == JobStatus.SUCCEEDED
    (consumer,) = named(spans, SpanKind.CONSUMER)
    assert consumer.links == ()


def test_the_dead_letter_links_each_failed_attempt_to_the_trace_backend(
    spans: list[ReadableSpan], superuser: Operator
) -> None:
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        jobs.always_fails.enqueue("traced")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get()
    trace_ids = [entry["trace_id"] for entry in dead.errors]
    assert len(trace_ids) == 3
    assert trace_ids == [
        trace.format_trace_id(span.context.trace_id) for span in named(spans, SpanKind.CONSUMER)
    ]
    url = reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
    with override_settings(JOBRETRY={**_settings(), "TRACE_URL": TRACE_URL}):
        page = superuser.get(url).content.decode()
    for trace_id in trace_ids:
        assert f'href="https://traces.example.com/trace/{trace_id}"' in page
    without = superuser.get(url).content.decode()
    assert "traces.example.com" not in without
    assert all(trace_id in without for trace_id in trace_ids)  # shown, not linked


def test_a_forged_trace_id_is_neither_shown_nor_linked(superuser: Operator) -> None:
    jobs.always_fails.enqueue("forged")
    run_jobs(include_scheduled=True)
    dead = DeadLetter.objects.get()
    forged = '"><script>alert(1)</script>'
    DeadLetter.objects.filter(pk=dead.pk).update(errors=[{**dead.errors[0], "trace_id": forged}])
    with override_settings(JOBRETRY={**_settings(), "TRACE_URL": TRACE_URL}):
        page = superuser.get(
            reverse("admin:django_jobretry_deadletter_change", args=[dead.pk])
        ).content.decode()
    assert "<script>alert(1)" not in page
    assert "traces.example.com" not in page


def _settings() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.JOBRETRY)


def test_tracing_reads_a_stored_context_warily() -> None:
    good = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert tracing.stored_context(json.dumps(good)) == good
    assert tracing.stored_context({**good, "tracestate": "a=b"}) == {**good, "tracestate": "a=b"}
    assert tracing.stored_context({"tracestate": "a=b"}) is None
    assert tracing.stored_context(None) is None


def test_without_opentelemetry_jobs_run_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The otel extra not installed: ``trace`` is None, and enqueue and attempts skip tracing entirely."""
    monkeypatch.setattr(tracing, "trace", None)
    enqueued = jobs.flaky.enqueue("untraced", 1)
    run_jobs(include_scheduled=True)
    job = Job.objects.get(pk=enqueued.pk)
    assert (job.status, job.trace_context) == (JobStatus.SUCCEEDED, None)
    assert [set(entry) & {"trace_id"} for entry in job.errors] == [set()]


@pytest.mark.parametrize(
    "url",
    [
        "https://traces.example.com/trace/",  # no field
        "https://traces.example.com/{trace_id}/{span_id}",  # another field
        "https://traces.example.com/{trace_id",  # an unmatched brace
        "javascript:alert('{trace_id}')",
        "/relative/{trace_id}",
        42,
    ],
)
def test_a_bad_trace_url_is_check_e016(url: object) -> None:
    problems = validate({"TRACE_URL": url})[1]
    assert [problem.id for problem in problems] == ["E016"]
    assert "{trace_id}" in problems[0].msg


def test_a_good_trace_url_passes() -> None:
    assert validate({"TRACE_URL": TRACE_URL})[1] == []
    assert validate({"TRACE_URL": None})[1] == []


def test_a_django_tasks_enqueue_is_traced_like_a_job(spans: list[ReadableSpan]) -> None:
    pytest.importorskip(
        "django.tasks", reason="django.tasks is Django 6.0+; Django 5.2 has no such front door"
    )
    from tests.jobs_app import tasks

    with trace.get_tracer("shop").start_as_current_span("checkout"):
        result = tasks.flaky.enqueue("traced-task", 1)
    run_jobs(include_scheduled=True)
    (producer,) = named(spans, SpanKind.PRODUCER)
    assert producer.attributes is not None
    assert producer.attributes["django_jobretry.task"] == "tests.jobs_app.tasks.flaky"
    consumers = named(spans, SpanKind.CONSUMER)
    assert len(consumers) == 2
    assert all(
        [link.context.span_id for link in span.links] == [producer.context.span_id] for span in consumers
    )
    assert tasks.flaky.get_result(result.id).status == "SUCCESSFUL"


class CountedStr(Exception):
    """Counts how often its text is asked for: user code, which a span must not run again."""

    calls = 0

    def __str__(self) -> str:
        CountedStr.calls += 1
        return "counted"


@job(name="tests.tracing.counted_str", policy="three")
def raise_counted_str() -> None:
    raise CountedStr


def calls_of_one_attempt() -> int:
    CountedStr.calls = 0
    raise_counted_str.enqueue()
    run_jobs()
    Job.objects.all().delete()
    return CountedStr.calls


def test_a_span_records_the_rendered_error_without_calling_the_exception_again(
    spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A __str__ that hangs or raises must cost a span nothing: its text is rendered once, with a bound."""
    traced = calls_of_one_attempt()
    (consumer,) = named(spans, SpanKind.CONSUMER)
    (event,) = consumer.events
    assert event.attributes is not None
    assert (event.name, event.attributes["exception.message"]) == ("exception", "counted")
    assert event.attributes["exception.type"] == f"{__name__}.CountedStr"
    monkeypatch.setattr(tracing, "trace", None)
    assert traced == calls_of_one_attempt() > 0
