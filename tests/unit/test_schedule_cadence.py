"""Cadences (policy/slots.py): interval slots anchored at the epoch, and bad cadences named by field.

The anchoring property runs against :class:`Cadence` (must pass) and
against broken_planners.FloatingCadence, which counts slots from the moment
asked about (must fail): every worker must compute the same slots.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_jobretry.policy import InvalidPolicy
from django_jobretry.policy.slots import MAX_EVERY, Cadence
from tests.unit.broken_planners import FloatingCadence
from tests.unit.slot_scenarios import EPOCH, PROPERTY_SETTINGS, Property, moments

# -- Interval slots are anchored at the epoch ------------------------------------------


def anchored_property(cadence_class: type[Cadence]) -> Property:
    @PROPERTY_SETTINGS
    @given(
        step=st.integers(1, int(MAX_EVERY.total_seconds())),
        early=moments,
        apart=st.integers(0, 50_000_000),  # in millionths of a step: up to 50 steps between them
    )
    def prop(step: int, early: datetime, apart: int) -> None:
        every = timedelta(seconds=step)
        cadence = cadence_class(every=every)
        late = early + every * (apart / 1_000_000)
        first = cadence.after(late)
        assert (first - EPOCH) % every == timedelta(0), f"{first} is off the epoch's grid"
        assert late < first <= late + every
        assert next(cadence.slots_before(first)) <= late
        # Read from the earlier moment, the same slots follow ``late``.
        from_early = itertools.dropwhile(lambda slot: slot <= late, cadence.slots_after(early))
        assert list(itertools.islice(from_early, 3)) == list(itertools.islice(cadence.slots_after(late), 3))

    return prop


def test_interval_slots_are_the_same_from_any_moment() -> None:
    anchored_property(Cadence)()


def test_anchored_rejects_slots_counted_from_the_start() -> None:
    with pytest.raises(AssertionError):
        anchored_property(FloatingCadence)()


# -- Bad cadences name the field -------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "allowed"),
    [
        ({"cron": "61 * * * *"}, "cron", "a cron expression: minute hour day month weekday"),
        ({"cron": "* * *"}, "cron", "a cron expression"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus_Mons"}, "tz", "an IANA time zone name"),
        ({"cron": "* * * * *", "tz": ""}, "tz", "an IANA time zone name"),
        ({}, "cron", "give exactly one of cron and every"),
        ({"cron": "* * * * *", "every": timedelta(seconds=60)}, "cron", "give exactly one of cron and every"),
        ({"every": timedelta(0)}, "every", "a timedelta from 0:00:01 to 366 days"),
        ({"every": timedelta(days=367)}, "every", "a timedelta from 0:00:01 to 366 days"),
        ({"every": 60}, "every", "a timedelta from"),
        ({"every": timedelta(seconds=1.5)}, "every", "whole seconds"),
    ],
)
def test_a_bad_cadence_raises_naming_the_field(fields: dict[str, object], field: str, allowed: str) -> None:
    with pytest.raises(InvalidPolicy) as raised:
        Cadence(**fields)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert raised.value.allowed.startswith(allowed), raised.value.allowed
    assert str(raised.value).startswith(f"{field}=")


def test_the_epoch_anchor_is_utc_midnight_1970() -> None:
    assert Cadence(every=timedelta(hours=1)).after(datetime(2026, 3, 29, 1, 59, tzinfo=UTC)) == datetime(
        2026, 3, 29, 2, tzinfo=UTC
    )
