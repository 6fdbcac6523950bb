"""A Sentry client per test whose transport keeps every envelope: nothing leaves the machine.

The SDK's default integrations are on, its logging integration making ERROR
lines events as sentry-sdk 2 does by default (a job's ``logger.exception``
is an event with frames), the auto-enabling ones off, so no test patches
Django for the tests after it. After the test the client is closed and
replaced by one without a DSN: the integration's receivers, installed for
the process, then send and change nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.logging import LoggingIntegration
from sentry_sdk.transport import Transport

from django_jobretry.contrib.sentry import JobRetryIntegration

DSN = "http://public@example.com/1"


class Capturing(Transport):
    """Keeps the envelopes the client would have sent."""

    def __init__(self) -> None:
        super().__init__()
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def events(self) -> list[dict[str, Any]]:
        return [
            item.payload.json
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == "event" and item.payload.json is not None
        ]

    def text(self) -> str:
        """Every envelope as sent (batched log lines too), to look for what must never be in one."""
        sentry_sdk.flush()
        return "\n".join(envelope.serialize().decode("utf-8", "replace") for envelope in self.envelopes)


@pytest.fixture
def sentry() -> Iterator[Callable[..., Capturing]]:
    """``sentry(**options)``: the SDK set up with JobRetryIntegration(**options) and a Capturing transport."""

    def init(**options: Any) -> Capturing:
        transport = Capturing()
        sentry_sdk.init(
            dsn=DSN,
            transport=transport,
            integrations=[JobRetryIntegration(**options), LoggingIntegration(event_level=logging.ERROR)],
            auto_enabling_integrations=False,
        )
        return transport

    yield init
    sentry_sdk.get_client().close()
    sentry_sdk.init()


def dumped(event: dict[str, Any]) -> str:
    return json.dumps(event, default=str)
