"""OpenTelemetry, when it is installed: a producer span per enqueue, a consumer span per attempt.

Optional (``pip install django-jobretry[otel]``); the project configures
the SDK and its exporter. Without ``opentelemetry-api`` nothing is
imported and every function here returns at once; with it but no SDK, the
API's no-op tracer makes the spans cost next to nothing.

- Enqueue: inside an active span, a short PRODUCER span ``send <queue>``
  is made, and its context (W3C ``traceparent`` and ``tracestate`` only,
  never baggage, which may hold user data) is stored on the job and
  carried into its dead letter and any requeued job.
- Each attempt: a CONSUMER span ``process <queue>``, current while the
  handler runs in the runner thread (the handler's own spans are its
  children), linked to the stored context, with the messaging semantic
  conventions' attributes, and on failure the error, its class and its
  kind (retryable or fatal). Its trace id is written into the attempt's
  history entry, from which the job and dead-letter pages link to a trace
  backend (``JOBRETRY["TRACE_URL"]``), as they link the stored context's
  (django_jobretry/admin/rendering.py).

A stored context is read as untrusted input: anything but a small object
of strings is ignored, and the W3C parser refuses a malformed header.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from django_jobretry.conf import jobretry_settings
from django_jobretry.jobs.claimed import ClaimedJob, Failed, Succeeded
from django_jobretry.jobs.history import DEFERRALS, clean_text, render_error
from django_jobretry.jobs.sql import as_json

if TYPE_CHECKING:
    from django_jobretry.policy import Classification

try:
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the otel extra is not installed: no tracing, no cost
    trace = None  # type: ignore[assignment]

#: The instrumentation's name, as backends show it.
TRACER = "django_jobretry"
#: ``messaging.system`` of every span.
SYSTEM = "django_jobretry"
#: The W3C headers kept: a trace context is no place for anything else.
HEADERS = ("traceparent", "tracestate")
#: Longest header value read back (tracestate is at most 512 characters by the W3C spec).
HEADER_CHARS = 600


@contextlib.contextmanager
def producing(queue_name: str, task_name: str, count: int = 1) -> Iterator[dict[str, str] | None]:
    """Around an enqueue: the context to store on its jobs, or None (no OpenTelemetry, no active span).

    Only inside an active span does a PRODUCER span start; the caller
    inserts the jobs inside the ``with`` so the span covers the statement.
    """
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        yield None
        return
    attributes = _messaging(queue_name, task_name, "send")
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(f"send {queue_name}", kind=SpanKind.PRODUCER, attributes=attributes):
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        yield {key: value for key, value in carrier.items() if key in HEADERS} or None


def sent(job_id: int) -> None:
    """Name the job an enqueue inserted (or found holding its key) on its PRODUCER span; else a no-op."""
    if trace is not None:
        trace.get_current_span().set_attribute("messaging.message.id", str(job_id))


def attempt(job: ClaimedJob, run: Callable[[], Succeeded | Failed], classify: Classify) -> Succeeded | Failed:
    """Run one attempt inside its CONSUMER span; a failure comes back with its trace id and classification.

    ``classify`` is the recorder's own classification (jobs/failures.py),
    done here once instead of there, so the span says the kind the worker acts on.
    """
    if trace is None:
        return run()
    with _consumer_span(job) as span:
        return _ended(span, run(), classify)


async def attempt_async(
    job: ClaimedJob, run: Callable[[], Awaitable[Succeeded | Failed]], classify: Classify
) -> Succeeded | Failed:
    """:func:`attempt` for a coroutine on the worker's event loop: the span is current in its task only."""
    if trace is None:
        return await run()
    with _consumer_span(job) as span:
        return _ended(span, await run(), classify)


def _consumer_span(job: ClaimedJob) -> Any:
    tracer = trace.get_tracer(TRACER)
    attributes = _messaging(job.queue_name, job.task_name, "process")
    attributes |= {"messaging.message.id": str(job.id), "django_jobretry.attempt": job.attempt}
    return tracer.start_as_current_span(
        f"process {job.queue_name}",
        kind=SpanKind.CONSUMER,
        links=_links(job.trace_context),
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )


def _ended(span: Any, outcome: Succeeded | Failed, classify: Classify) -> Succeeded | Failed:
    """The attempt's outcome, its failure (if any) written on ``span`` and carrying the span's trace id."""
    if not isinstance(outcome, Failed) or outcome.ended in DEFERRALS:  # a snooze is no failure
        return outcome
    classification = outcome.classification or classify(outcome)
    # The error's text as the history entry gets it: rendered once, with a time bound, never by
    # calling the exception again (the SDK's record_exception would: a __str__ may hang).
    rendered = outcome.rendered or render_error(outcome.error)
    span.add_event(
        "exception",
        {
            "exception.type": rendered.error_class,
            "exception.message": clean_text(rendered.message, jobretry_settings.error_message_chars),
            "exception.stacktrace": clean_text(
                rendered.traceback, jobretry_settings.traceback_chars, keep_end=True
            ),
        },
    )
    span.set_attributes(
        {"error.type": rendered.error_class, "django_jobretry.error_kind": classification.kind.value}
    )
    span.set_status(Status(StatusCode.ERROR))
    context = span.get_span_context()
    trace_id = trace.format_trace_id(context.trace_id) if context.is_valid else ""
    return dataclasses.replace(outcome, classification=classification, rendered=rendered, trace_id=trace_id)


type Classify = Callable[[Failed], Classification]


def stored_context(raw: Any) -> dict[str, str] | None:
    """A stored trace context as headers, or None: whatever else a row holds is ignored."""
    value = as_json(raw) if isinstance(raw, str) else raw
    if not isinstance(value, Mapping) or len(value) > len(HEADERS):
        return None
    headers = {
        key: text
        for key, text in value.items()
        if key in HEADERS and isinstance(text, str) and len(text) <= HEADER_CHARS
    }
    return headers if "traceparent" in headers else None


def _links(raw: Any) -> list[Link]:
    headers = None
    with contextlib.suppress(ValueError, RecursionError):
        headers = stored_context(raw)
    if headers is None:
        return []
    context = trace.get_current_span(TraceContextTextMapPropagator().extract(headers)).get_span_context()
    return [Link(context)] if context.is_valid else []


def _messaging(queue_name: str, task_name: str, operation: str) -> dict[str, Any]:
    """The messaging semantic conventions' attributes, and the task (its name, never its arguments)."""
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": queue_name,
        "django_jobretry.task": task_name,
    }
