"""When a schedule's runs are due, and which of them run after downtime: pure, no Django.

A schedule's *cadence* is a cron expression read in a time zone (parsed by
cronsim, never by us) or a fixed interval. Its slots are the instants the
cadence names; interval slots are anchored at the Unix epoch, so every
worker on every host computes the same slots without talking to the others.
Slots are compared with the database clock's ``now`` the caller passes in.

:func:`plan` is the catch-up decision: given the earliest slot not yet
decided (``next_slot``) and ``now``, which due slots run, how many are
dropped and where the schedule continues. It never enumerates more than
:data:`MAX_ENUMERATED` slots, whatever the downtime.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from django_jobretry.policy.errors import InvalidPolicy

#: The most due slots one plan looks at; past it the dropped count is a lower bound (``dropped_more``).
MAX_ENUMERATED = 10_000
#: The longest a slot may be late and still count as on time for ``catch_up="none"``.
MAX_GRACE = timedelta(seconds=60)
#: Shortest interval: a slot a second is what one pass per second can keep.
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)
#: The default ``catch_up_limit`` of ``catch_up="all"``.
DEFAULT_CATCH_UP_LIMIT = 100
#: The longest :meth:`Cadence.describe` a schedule's row can store (its ``cadence`` column).
DESCRIBED_MAX_LENGTH = 300

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Added to ``now`` to read the slots at or before it with :meth:`Cadence.slots_before`.
_TICK = timedelta(microseconds=1)


class CatchUp(enum.StrEnum):
    """What runs for the slots that came due while no worker looked (downtime)."""

    #: One run, for the newest due slot; the older ones are collapsed into it.
    LATEST = "latest"
    #: Every due slot runs, the newest ``catch_up_limit`` of them; the older ones are skipped.
    ALL = "all"
    #: Only a slot seen on time runs (late by at most the grace); the late ones are missed.
    NONE = "none"


class Overlap(enum.StrEnum):
    """What a slot does while an earlier run of its schedule is still ready, running or retrying."""

    #: No new run: the slot is skipped and counted.
    SKIP = "skip"
    #: The slot waits and runs after the live run ends.
    QUEUE = "queue"
    #: A new run starts beside the live one.
    ALLOW = "allow"


@dataclass(frozen=True)
class Cadence:
    """A cron expression in a time zone, or an interval: the slots of one schedule."""

    cron: str | None = None
    tz: str = "UTC"
    every: timedelta | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise InvalidPolicy("cron", self.cron, "give exactly one of cron and every")
        if self.every is not None:
            if not isinstance(self.every, timedelta) or not MIN_EVERY <= self.every <= MAX_EVERY:
                raise InvalidPolicy("every", self.every, f"a timedelta from {MIN_EVERY} to {MAX_EVERY}")
            if self.every.microseconds:
                raise InvalidPolicy("every", self.every, "whole seconds")
            return
        self.zone()  # raises for an unknown time zone
        try:
            CronSim(str(self.cron), datetime.now(self.zone()))
        except (CronSimError, TypeError) as exc:
            raise InvalidPolicy(
                "cron", self.cron, f"a cron expression: minute hour day month weekday ({exc})"
            ) from None

    def zone(self) -> ZoneInfo:
        """The time zone the cron expression is read in (DST included)."""
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise InvalidPolicy("tz", self.tz, "an IANA time zone name, e.g. 'Europe/Berlin'.") from None

    def describe(self) -> str:
        """The cadence in one line; a changed line means a changed schedule (its slots start over)."""
        if self.every is not None:
            return f"every {int(self.every.total_seconds())}s"
        return f"cron {self.cron} {self.tz}"

    def after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment`` (an aware datetime), in UTC."""
        return next(self.slots_after(moment))

    def slots_before(self, moment: datetime) -> Iterator[datetime]:
        """The slots strictly before ``moment``, newest first, in UTC."""
        if self.every is not None:
            step = int(self.every.total_seconds())
            index = math.ceil((moment - _EPOCH).total_seconds() / step) - 1
            while True:
                yield _EPOCH + timedelta(seconds=index * step)
                index -= 1
        zone = self.zone()
        for local in CronSim(str(self.cron), moment.astimezone(zone), reverse=True):
            yield local.astimezone(UTC)

    def slots_after(self, moment: datetime) -> Iterator[datetime]:
        """The slots strictly after ``moment``, in order, in UTC."""
        if self.every is not None:
            step = int(self.every.total_seconds())
            index = math.floor((moment - _EPOCH).total_seconds() / step) + 1
            while True:
                yield _EPOCH + timedelta(seconds=index * step)
                index += 1
        zone = self.zone()
        for local in CronSim(str(self.cron), moment.astimezone(zone)):
            yield local.astimezone(UTC)


@dataclass(frozen=True)
class SlotPlan:
    """What one look at a schedule decided: the slots to run now and the slots dropped."""

    #: The due slots that run, oldest first.
    run: tuple[datetime, ...]
    #: How many due slots do not run (collapsed, skipped or missed, by the catch-up policy).
    dropped: int
    #: The first and last of the dropped slots, for the log line (None when none was dropped).
    first_dropped: datetime | None
    last_dropped: datetime | None
    #: True when more slots were due than a plan looks at: ``dropped`` is then a lower bound.
    dropped_more: bool
    #: The first slot after ``now``: where the schedule continues.
    next_slot: datetime


def plan(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """The slots due at ``now`` from ``next_slot`` on (inclusive), and which of them run.

    ``limit`` is ``catch_up="all"``'s cap. Slots that run are the newest ones
    (a run that is due anyway covers the time closest to now). For
    ``none`` a slot is on time when it is late by at most :func:`grace`.
    """
    if next_slot > now:
        return SlotPlan((), 0, None, None, False, next_slot)
    due = [next_slot, *islice(_until(cadence, next_slot, now), MAX_ENUMERATED - 1)]
    more = len(due) == MAX_ENUMERATED and cadence.after(due[-1]) <= now
    if more:  # the newest slots, read backwards from now: the enumeration stopped short of them
        newest = list(islice(cadence.slots_before(now + _TICK), max(1, limit)))[::-1]
    else:
        newest = due[-max(1, limit) :]
    if catch_up is CatchUp.LATEST:
        run = newest[-1:]
    elif catch_up is CatchUp.ALL:
        run = newest
    else:
        on_time = not more and now - due[-1] <= grace(cadence, due[-1])
        run = due[-1:] if on_time else []
    dropped = len(due) - len(run)
    last_dropped = None
    if dropped:
        last_dropped = next(cadence.slots_before(run[0] if run else now + _TICK))
    return SlotPlan(
        run=tuple(run),
        dropped=dropped,
        first_dropped=next_slot if dropped else None,
        last_dropped=last_dropped,
        dropped_more=more,
        next_slot=cadence.after(now),
    )


def grace(cadence: Cadence, slot: datetime) -> timedelta:
    """How late ``slot`` may be seen and still be on time: half the gap to the next slot, at most a minute."""
    return min(MAX_GRACE, (cadence.after(slot) - slot) / 2)


def _until(cadence: Cadence, start: datetime, now: datetime) -> Iterator[datetime]:
    for slot in cadence.slots_after(start):
        if slot > now:
            return
        yield slot
