"""Cron schedules across daylight saving time: Europe/Berlin, 29 March and 25 October 2026.

A worker is simulated looking once a minute (7 s past it, as a worker's
look lands a little after the minute), carrying ``next_slot`` from one
:func:`plan` to the next exactly as schedules/runs.py does, through the
day before, the day of and the day after each transition. Every catch-up
policy must give the same runs, with nothing dropped: a worker looking
every minute is never late.

On 29 March clocks jump from 02:00 CET to 03:00 CEST, so 02:30 does not
exist; on 25 October they go back from 03:00 CEST to 02:00 CET, so 02:30
happens twice (first in CEST, UTC+2, then in CET, UTC+1).
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from django_jobretry.policy.slots import Cadence, CatchUp, plan

BERLIN = ZoneInfo("Europe/Berlin")
LOOK_EVERY = timedelta(seconds=60)
SPRING, AUTUMN = date(2026, 3, 29), date(2026, 10, 25)


def looks_every_minute(cadence: Cadence, catch_up: CatchUp, around: date) -> list[datetime]:
    """The runs a worker looking once a minute starts from the day before ``around`` to the day after."""
    # In UTC: adding a minute to a Berlin wall-clock time would step into the hour that does not exist.
    now = midnight(around - timedelta(days=1)) + timedelta(seconds=7)
    end = midnight(around + timedelta(days=2))
    next_slot = cadence.after(now - LOOK_EVERY)
    runs: list[datetime] = []
    while now < end:
        decided = plan(cadence, next_slot, now, catch_up)
        assert decided.dropped == 0, f"{decided} dropped a slot though the worker looked every minute"
        runs += decided.run
        next_slot = decided.next_slot
        now += LOOK_EVERY
    return runs


def midnight(local_day: date) -> datetime:
    return datetime.combine(local_day, time(), BERLIN).astimezone(UTC)


def on(local_day: date, runs: list[datetime]) -> list[datetime]:
    return [run for run in runs if run.astimezone(BERLIN).date() == local_day]


def clocks(runs: list[datetime]) -> list[str]:
    """The runs as a Berlin wall clock shows them, with the offset's name."""
    return [run.astimezone(BERLIN).strftime("%H:%M %Z") for run in runs]


@pytest.mark.parametrize("catch_up", list(CatchUp))
def test_a_daily_0230_runs_once_each_day_at_0300_when_0230_does_not_exist(catch_up: CatchUp) -> None:
    """Spring: 02:30 does not exist on 29 March; the run is at 03:00 CEST (01:00 UTC), as cron does.

    The day's run is neither lost nor doubled, and the days around it are
    unaffected (02:30 CET = 01:30 UTC before, 02:30 CEST = 00:30 UTC after).
    """
    runs = looks_every_minute(Cadence(cron="30 2 * * *", tz="Europe/Berlin"), catch_up, SPRING)
    assert runs == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]
    assert clocks(runs) == [
        "02:30 CET",
        "03:00 CEST",
        "02:30 CEST",
    ]


@pytest.mark.parametrize("catch_up", list(CatchUp))
def test_a_daily_0230_runs_once_on_the_day_0230_happens_twice(catch_up: CatchUp) -> None:
    """Autumn: 02:30 happens twice on 25 October; only the first, 02:30 CEST (00:30 UTC), runs.

    The second 02:30 (CET, 01:30 UTC) is not a slot of a daily schedule:
    one run a day, as on the days around it.
    """
    runs = looks_every_minute(Cadence(cron="30 2 * * *", tz="Europe/Berlin"), catch_up, AUTUMN)
    assert runs == [
        datetime(2026, 10, 24, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
    assert clocks(runs) == [
        "02:30 CEST",
        "02:30 CEST",
        "02:30 CET",
    ]


@pytest.mark.parametrize("catch_up", list(CatchUp))
def test_an_hourly_schedule_skips_the_missing_hour_and_runs_twice_in_the_repeated_one(
    catch_up: CatchUp,
) -> None:
    """An hourly "30 * * * *" follows the wall clock, which is one real hour apart throughout.

    29 March has 23 hours: no 02:30 exists, so none runs (the run after
    01:30 CET is 03:30 CEST, one real hour later) and the day has 23 runs.
    25 October has 25 hours: 02:30 comes twice and runs twice, first in
    CEST then in CET, one real hour apart, and the day has 25 runs. In UTC
    the runs are simply every hour at :30, with no gap and no double.
    Unlike the daily schedule above, which names the missing hour and so
    runs at 03:00, an hourly loses nothing by skipping 02:30: 03:30 CEST
    is already the next real hour's run.
    """
    hourly = Cadence(cron="30 * * * *", tz="Europe/Berlin")
    spring, autumn = (looks_every_minute(hourly, catch_up, day) for day in (SPRING, AUTUMN))
    for runs in (spring, autumn):
        assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(runs))
    assert [len(on(SPRING + timedelta(days=n), spring)) for n in (-1, 0, 1)] == [24, 23, 24]
    assert [len(on(AUTUMN + timedelta(days=n), autumn)) for n in (-1, 0, 1)] == [24, 25, 24]
    assert clocks(on(SPRING, spring))[:4] == ["00:30 CET", "01:30 CET", "03:30 CEST", "04:30 CEST"]
    assert clocks(on(AUTUMN, autumn))[:5] == [
        "00:30 CEST",
        "01:30 CEST",
        "02:30 CEST",
        "02:30 CET",
        "03:30 CET",
    ]
    spring_clock = Counter(clock[:5] for clock in clocks(on(SPRING, spring)))
    autumn_clock = Counter(clock[:5] for clock in clocks(on(AUTUMN, autumn)))
    assert "02:30" not in spring_clock
    assert autumn_clock["02:30"] == 2
    assert {n for clock, n in (spring_clock + autumn_clock).items() if clock != "02:30"} == {2}
