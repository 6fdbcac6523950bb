"""The OpenTelemetry SDK every test process runs with, and the spans the tracing tests read.

The tracing tests are tests/integration/jobs/test_tracing.py.

Installed once per process from tests/conftest.py, before any test: every
attempt of the whole suite then runs inside a recording span, in whatever
order the tests come, as in a project that configures tracing. Spans are
kept only while a test turns the recording on.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider


class Recording(SpanProcessor):
    """Keeps the spans that end while ``on``: the SDK's own spans, as an exporter would get them."""

    def __init__(self) -> None:
        self.on = False
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.spans.append(span)


RECORDING = Recording()


def install() -> None:
    """Make an SDK tracer provider with :data:`RECORDING` the global one (OpenTelemetry allows one)."""
    provider = TracerProvider()
    provider.add_span_processor(RECORDING)
    trace.set_tracer_provider(provider)
