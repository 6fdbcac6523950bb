"""The heartbeat's duties besides leases: what a worker reports for operators.

The heartbeat thread (worker/heartbeat.py) extends leases first, then runs
each duty in turn, once at start and once a beat. None of these duties can
cost a lease: a duty that fails is logged (once per failing stretch, then at
DEBUG: a table not migrated yet would warn every beat), its connection is
dropped, and the beat goes on. A capability's periodic duty is named by its
entry in features.py, and runs between the worker's own duties below.

- :class:`WorkerRow` keeps the worker's row in the workers table
  (console/workers.py): registered at once, refreshed with each beat (one
  statement, whatever the number of jobs), deleted after the drain.
- :class:`EventCounts` writes the process's event counts for the metrics
  (worker/counting.py) with one statement a beat and once more at a clean
  exit; a failed write keeps the counts for the next beat.
- :class:`Holds` ends the pauses whose ``until`` passed and moves the
  breakers on (services/holds.py, services/circuits.py): a probe once a
  cooldown ends, a close or a reopening once a probe's fate is known. So a
  breaker acts up to one beat after its cooldown; every worker takes part,
  each breaker row locked by one of them at a time.
- :class:`StatusSample` takes the dashboard's sample for the current minute
  unless another worker already has (console/status_samples.py): a missing
  sample only leaves a gap in a chart.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django_jobretry import features
from django_jobretry.console import counters, status_samples, workers
from django_jobretry.display.humanize import humanize_delay
from django_jobretry.services import circuits, holds
from django_jobretry.worker import counting

logger = logging.getLogger("django_jobretry")


class Duty:
    """One periodic duty of the heartbeat thread; what a duty does not override does nothing."""

    #: What failed, for the log line: "could not <failure>".
    failure: str

    def start(self) -> None:
        """On the thread starting the heartbeat, before it runs (the worker may claim at once)."""

    def beat(self, running: int) -> None:
        """Once at start (``running`` 0) and once a beat, after the leases; may raise."""

    def finish(self) -> None:
        """Once, at a clean stop after the drain (in reverse order of the list); may raise."""

    def close(self) -> None:
        """Always, last, on the heartbeat thread; never raises."""


class WorkerRow(Duty):
    """The worker's row in the workers table; logs the lost workers a beat removed."""

    failure = "update the workers table"

    def __init__(self, registration: workers.Registration) -> None:
        self.registration = registration
        self.started_at: datetime | None = None

    def beat(self, running: int) -> None:
        beat = workers.beat(self.registration, running, self.started_at)
        self.started_at = beat.started_at
        for removed in beat.removed:
            logger.info(
                "worker %s removed from the workers table: no heartbeat for its lease and %s more",
                removed,
                humanize_delay(workers.LOST_KEPT),
                extra={
                    "worker": self.registration.worker_id,
                    "removed_worker": removed,
                    "outcome": "worker_removed",
                },
            )

    def finish(self) -> None:
        """A clean exit: the row goes (else it would be shown as lost, then removed)."""
        workers.unregister(self.registration.worker_id)


class EventCounts(Duty):
    """This process's event counts, written and folded with one statement."""

    failure = "write the event counters"

    def start(self) -> None:
        counting.begin()

    def beat(self, running: int) -> None:
        taken = counting.TALLY.take()
        try:
            counters.flush(taken)
        except BaseException:
            counting.TALLY.put_back(taken)
            raise

    def finish(self) -> None:
        self.beat(0)

    def close(self) -> None:
        counting.end()


class Holds(Duty):
    """Expired pauses ended, breakers moved on."""

    failure = "move the pauses and breakers on"

    def __init__(self) -> None:
        #: The breakers this heartbeat judges, each alone: which of them failed at the last beat.
        self.breakers = circuits.breakers()

    def beat(self, running: int) -> None:
        holds.end_expired()
        circuits.beat(self.breakers)


class StatusSample(Duty):
    """This minute's status sample for the dashboard, unless a worker already took it."""

    failure = "take the status sample"

    def beat(self, running: int) -> None:
        status_samples.take()


def console(registration: workers.Registration) -> list[Duty]:
    """A registered worker's duties, in the order each beat runs them: its own, and each capability's."""
    found: list[Duty] = [features.load(feature.duty)() for feature in features.FEATURES if feature.duty]
    return [WorkerRow(registration), EventCounts(), *found, StatusSample()]
