"""Counting a worker's events for the metrics: in memory, written by the heartbeat thread.

A job's start, success, retry or death is already announced by a signal
after its transition commits (docs/worker.md#signals), on whichever thread
made it; the receivers here only add one to the process's :data:`TALLY`, so
the claim and record statements stay as they are (their query budgets are
tested). The heartbeat thread writes the tally with one statement a beat
and once more at a clean exit (console/counters.py): a worker that crashes
loses at most one heartbeat period of counts.

Receivers are connected only while a worker's heartbeat runs in this
process (reference-counted: tests run several workers in one process), so
a web process, or ``django_jobretry.testing`` running jobs inline, counts
nothing here and never holds counts no one will write. The django-q2
adapter sends the same signals from its cluster processes, where no
heartbeat runs: its events are not counted (docs/metrics.md).
"""

from __future__ import annotations

import threading
from typing import Any

from django_jobretry import signals
from django_jobretry.console.counters import Tally
from django_jobretry.models import CounterEvent

#: This process's counts not yet written.
TALLY = Tally.empty()

_RECEIVERS = {
    signals.job_started: CounterEvent.STARTED,
    signals.job_succeeded: CounterEvent.SUCCEEDED,
    signals.job_retry_scheduled: CounterEvent.RETRIED,
    signals.job_dead_lettered: CounterEvent.DEAD,
}


def _receiver(event: CounterEvent) -> Any:
    def count(sender: type, *, task_name: str, queue_name: str, **kwargs: Any) -> None:
        TALLY.add(event, task_name, queue_name)

    return count


class _Receivers:
    """The receivers, connected while at least one heartbeat runs (signals hold receivers weakly)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.receivers = {signal: _receiver(event) for signal, event in _RECEIVERS.items()}

    def begin(self) -> None:
        with self.lock:
            self.users += 1
            if self.users == 1:
                for signal, receiver in self.receivers.items():
                    signal.connect(receiver, dispatch_uid=f"django_jobretry.counting.{id(signal)}")

    def end(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                for signal in self.receivers:
                    signal.disconnect(dispatch_uid=f"django_jobretry.counting.{id(signal)}")


_connected = _Receivers()


def begin() -> None:
    """A heartbeat starts in this process: count from now on (before its worker claims anything)."""
    _connected.begin()


def end() -> None:
    """A heartbeat stopped after its last flush; the last one disconnects the receivers."""
    _connected.end()
