"""The slot planner's promises (policy/slots.py) as hypothesis properties, each with a negative control.

Every property is built by a factory taking the planner, so the very same
property runs against :func:`plan` (must pass) and against a deliberately
broken copy from broken_planners.py (must fail). The expected values come
from the scenario's own list of due slots, not from the planner. The
cadence's own properties are in test_schedule_cadence.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import Phase, event, find, given, settings
from hypothesis import strategies as st

from django_jobretry.policy.slots import MAX_ENUMERATED, CatchUp, SlotPlan, grace, plan
from tests.unit import broken_planners as broken
from tests.unit.broken_planners import CountingCadence, OverBudget, Planner
from tests.unit.slot_scenarios import PROPERTY_SETTINGS, Property, Scenario, is_slot, moments, scenarios


def look(planner: Planner, s: Scenario) -> SlotPlan:
    return planner(s.cadence, s.next_slot, s.now, s.catch_up, limit=s.limit)


def rejects(make: Callable[[Planner], Property], planner: Planner) -> None:
    with pytest.raises(AssertionError):
        make(planner)()


# -- Runs are due slots of the cadence, oldest first -----------------------------------


def due_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios())
    def prop(s: Scenario) -> None:
        for slot in look(planner, s).run:
            assert s.next_slot <= slot <= s.now, f"{slot} runs but is not due"
            assert is_slot(s.cadence, slot), f"{slot} is not a slot of {s.cadence.describe()}"

    return prop


def test_every_run_is_a_due_slot() -> None:
    due_property(plan)()


def test_due_rejects_a_run_after_now() -> None:
    rejects(due_property, broken.runs_a_slot_after_now)


def increasing_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios())
    def prop(s: Scenario) -> None:
        run = look(planner, s).run
        event(f"{min(len(run), 2)}+ runs")
        assert all(a < b for a, b in itertools.pairwise(run)), run

    return prop


def test_runs_are_strictly_increasing() -> None:
    increasing_property(plan)()


def test_increasing_rejects_newest_first() -> None:
    rejects(increasing_property, broken.runs_newest_first)


# -- Every due slot is accounted for, and the schedule continues after now ---------------


def count_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios())
    def prop(s: Scenario) -> None:
        found, due = look(planner, s), s.due()
        assert not found.dropped_more  # the scenarios stay far below MAX_ENUMERATED
        assert len(found.run) + found.dropped == len(due), (found, len(due))
        dropped = [slot for slot in due if slot not in found.run]
        assert (found.first_dropped, found.last_dropped) == (
            (dropped[0], dropped[-1]) if dropped else (None, None)
        )

    return prop


def test_runs_and_dropped_add_up_to_the_due_slots() -> None:
    count_property(plan)()


def test_count_rejects_an_uncounted_slot() -> None:
    rejects(count_property, broken.counts_one_dropped_slot_too_few)


def next_slot_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios())
    def prop(s: Scenario) -> None:
        # Drawn looks are at or after the moment next_slot was computed from, so the first slot
        # after now is next_slot itself when nothing is due.
        assert look(planner, s).next_slot == s.first_after_now()

    return prop


def test_the_schedule_continues_at_the_first_slot_after_now() -> None:
    next_slot_property(plan)()


def test_next_slot_rejects_continuing_at_the_last_due_slot() -> None:
    rejects(next_slot_property, broken.continues_at_the_last_due_slot)


def nothing_due_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios())
    def prop(s: Scenario) -> None:
        found = look(planner, s)
        if s.due():
            return
        event("nothing due")
        assert (found.run, found.dropped, found.first_dropped, found.last_dropped) == ((), 0, None, None)

    return prop


def test_nothing_due_runs_and_drops_nothing() -> None:
    nothing_due_property(plan)()


def test_nothing_due_rejects_counting_the_coming_slot() -> None:
    rejects(nothing_due_property, broken.counts_a_slot_not_yet_due)


# -- The catch-up policies --------------------------------------------------------------


def latest_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios(CatchUp.LATEST))
    def prop(s: Scenario) -> None:
        due = s.due()
        assert look(planner, s).run == tuple(due[-1:]), "latest runs the newest due slot, once"

    return prop


def test_latest_runs_exactly_the_newest_due_slot() -> None:
    latest_property(plan)()


def test_latest_rejects_two_runs() -> None:
    rejects(latest_property, broken.latest_runs_the_newest_two)


def all_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios(CatchUp.ALL))
    def prop(s: Scenario) -> None:
        due = s.due()
        event("over the limit" if len(due) > s.limit else "within the limit")
        assert look(planner, s).run == tuple(due[len(due) - min(len(due), s.limit) :])

    return prop


def test_all_runs_the_newest_due_slots_up_to_the_limit() -> None:
    all_property(plan)()


def test_all_rejects_running_the_oldest() -> None:
    rejects(all_property, broken.all_runs_the_oldest)


def none_property(planner: Planner) -> Property:
    @PROPERTY_SETTINGS
    @given(s=scenarios(CatchUp.NONE))
    def prop(s: Scenario) -> None:
        due, run = s.due(), look(planner, s).run
        assert len(run) <= 1
        if run:
            assert run == (due[-1],), "only the newest due slot may run"
            assert s.now - due[-1] <= grace(s.cadence, due[-1]), "a late slot ran"
        on_time = bool(due) and s.now - due[-1] <= min(
            timedelta(seconds=60), (s.first_after_now() - due[-1]) / 2
        )
        event("on time" if on_time else "late or nothing due")
        assert bool(run) == on_time

    return prop


def test_none_runs_only_a_slot_seen_within_its_grace() -> None:
    none_property(plan)()


def test_none_rejects_running_a_late_slot() -> None:
    rejects(none_property, broken.none_ignores_the_grace)


# -- Bounded work: a week of 1-second slots ---------------------------------------------


def bounded_property(planner: Planner) -> Property:
    """A plan reads at most MAX_ENUMERATED due slots, the newest ``limit`` again from now, and 3 more."""

    # No shrinking: a failing example reads ten thousand slots, and the first one found is plain enough.
    @settings(max_examples=12, deadline=None, database=None, phases=(Phase.generate,))
    @given(catch_up=st.sampled_from(CatchUp), limit=st.integers(1, 50), now=moments)
    def prop(catch_up: CatchUp, limit: int, now: datetime) -> None:
        cadence = CountingCadence(every=timedelta(seconds=1), budget=MAX_ENUMERATED + limit + 3)
        next_slot = now.replace(microsecond=0) - timedelta(days=7)
        found = planner(cadence, next_slot, now, catch_up, limit=limit)
        newest = now.replace(microsecond=0)
        assert found.dropped_more
        assert found.next_slot == newest + timedelta(seconds=1)
        expected = {
            CatchUp.LATEST: (newest,),
            CatchUp.ALL: tuple(newest - timedelta(seconds=n) for n in reversed(range(limit))),
            CatchUp.NONE: (),  # seen late: too many slots were due to tell
        }[catch_up]
        assert found.run == expected
        assert MAX_ENUMERATED - len(found.run) <= found.dropped < 7 * 86_400 + 1 - len(found.run)

    return prop


def test_a_week_of_one_second_slots_plans_in_bounded_work() -> None:
    bounded_property(plan)()


def test_bounded_rejects_listing_every_due_slot() -> None:
    with pytest.raises(OverBudget):
        bounded_property(broken.enumerates_every_due_slot)()


# -- The scenarios reach every case the properties tell apart ---------------------------


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda s: not s.due(), id="nothing-due"),
        pytest.param(lambda s: len(s.due()) > s.limit and s.catch_up is CatchUp.ALL, id="over-the-limit"),
        pytest.param(
            lambda s: (
                s.catch_up is CatchUp.NONE and bool(plan(s.cadence, s.next_slot, s.now, s.catch_up).run)
            ),
            id="none-on-time",
        ),
        pytest.param(
            lambda s: (
                s.catch_up is CatchUp.NONE
                and bool(s.due())
                and not plan(s.cadence, s.next_slot, s.now, s.catch_up).run
            ),
            id="none-late",
        ),
        pytest.param(lambda s: s.cadence.cron is not None and s.cadence.tz != "UTC", id="cron-in-a-zone"),
    ],
)
def test_scenarios_reach(condition: Callable[[Scenario], bool]) -> None:
    find(scenarios(), condition, settings=settings(max_examples=2_000, database=None))
