"""Hypothesis scenarios for the slot planner: a cadence, where it stands, and a look at it.

Cadences are intervals from 1 s to 366 days and cron expressions in zones
with and without DST (Lord Howe's is 30 minutes, Kathmandu is +05:45). A
look is near a slot (on time or a little late), late after a slot (past
half the gap to the next slot or a minute, whichever is less, but before
that next slot), anywhere in a window of about thirty slots, or before the
next slot (nothing due), so every branch of :func:`plan` is drawn whatever
the seed: Hypothesis favours small offsets, so "near a slot" alone can draw
no late look in 200 examples, and the negative control for ``none`` missed.
The window keeps the due slots well below MAX_ENUMERATED: the bounded case
has a test of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice, takewhile

from hypothesis import settings
from hypothesis import strategies as st

from django_jobretry.policy.slots import MAX_EVERY, Cadence, CatchUp

type Property = Callable[[], None]
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, database=None, report_multiple_bugs=False)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TICK = timedelta.resolution
#: The most slots past the next one a look is drawn at.
SLOTS_AHEAD = 30
#: A look this long after a slot is late for every cadence (policy/slots.py caps the grace at a minute).
LATE_AFTER = timedelta(seconds=60)
#: Cron expressions and about how far apart their slots are, in seconds.
CRONS = (
    ("* * * * *", 60),
    ("*/5 * * * *", 300),
    ("30 * * * *", 3_600),
    ("30 2 * * *", 86_400),
    ("0 3 * * 1", 7 * 86_400),
    ("15,45 9-17 * * 1-5", 3_600),
    ("0 0 1 * *", 31 * 86_400),
)
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu")

moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC)
)


@dataclass(frozen=True)
class Scenario:
    """One look at one schedule: ``next_slot`` is the earliest slot not decided yet."""

    cadence: Cadence
    next_slot: datetime
    now: datetime
    catch_up: CatchUp
    limit: int

    def due(self) -> list[datetime]:
        """The due slots, oldest first: the cadence's slots from next_slot to now, both included."""
        return list(takewhile(lambda slot: slot <= self.now, self.slots_from_next()))

    def first_after_now(self) -> datetime:
        return next(slot for slot in self.slots_from_next() if slot > self.now)

    def slots_from_next(self) -> Iterator[datetime]:
        return self.cadence.slots_after(self.next_slot - TICK)


@st.composite
def cadences(draw: st.DrawFn) -> tuple[Cadence, int]:
    """A cadence and about how far apart its slots are, in seconds."""
    if draw(st.booleans()):
        step = draw(st.one_of(st.integers(1, 7_200), st.integers(1, int(MAX_EVERY.total_seconds()))))
        return Cadence(every=timedelta(seconds=step)), step
    cron, spacing = draw(st.sampled_from(CRONS))
    return Cadence(cron=cron, tz=draw(st.sampled_from(ZONES))), spacing


@st.composite
def scenarios(draw: st.DrawFn, catch_up: CatchUp | None = None) -> Scenario:
    """A look at ``start`` or later at a schedule whose next slot is the first after ``start``."""
    cadence, spacing = draw(cadences())
    start = draw(moments)
    next_slot = cadence.after(start)
    where = draw(st.sampled_from(("near a slot", "late after a slot", "anywhere", "before the next slot")))
    if where in ("near a slot", "late after a slot"):
        slots = cadence.slots_after(next_slot - TICK)
        slot = next(islice(slots, draw(st.integers(0, SLOTS_AHEAD)), None))
        if where == "near a slot":
            now = slot + timedelta(microseconds=draw(st.integers(0, 150_000_000)))
        else:
            gap = next(slots) - slot
            late = min(LATE_AFTER, gap / 2) + TICK
            now = slot + late + TICK * draw(st.integers(0, (gap - late) // TICK - 1))
    elif where == "anywhere":
        now = start + timedelta(microseconds=draw(st.integers(0, SLOTS_AHEAD * spacing * 1_000_000)))
    else:
        now = start + (next_slot - start) * draw(st.floats(0, 1, exclude_max=True))
    return Scenario(
        cadence=cadence,
        next_slot=next_slot,
        now=now,
        catch_up=draw(st.sampled_from(CatchUp)) if catch_up is None else catch_up,
        limit=draw(st.integers(1, SLOTS_AHEAD + 5)),
    )


def is_slot(cadence: Cadence, moment: datetime) -> bool:
    """Whether ``moment`` is one of the cadence's slots (an interval's: whole steps from the epoch)."""
    if cadence.every is not None:
        return (moment - EPOCH) % cadence.every == timedelta(0)
    return cadence.after(moment - TICK) == moment
