"""Deliberately broken slot planners and cadences: each property of test_schedule_slots.py rejects one.

They are the negative controls of the slot properties: each wraps the real
:func:`plan` (or :class:`Cadence`) and breaks exactly one promise, so a
property that passes against its broken planner is not testing anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import takewhile
from typing import Protocol

from django_jobretry.policy.slots import Cadence, CatchUp, SlotPlan, plan


class Planner(Protocol):
    """What a property calls: :func:`plan` or a broken copy of it."""

    def __call__(
        self, cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
    ) -> SlotPlan: ...


def runs_a_slot_after_now(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Runs the coming slot too, before it is due."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    return dataclasses.replace(found, run=(*found.run, cadence.after(now))) if found.run else found


def runs_newest_first(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Returns the runs newest first: the runs are then inserted out of order."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    return dataclasses.replace(found, run=found.run[::-1])


def counts_one_dropped_slot_too_few(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Off by one in the count: a dropped slot goes uncounted."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    return dataclasses.replace(found, dropped=max(0, found.dropped - 1))


def continues_at_the_last_due_slot(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Off by one slot: the schedule continues at the slot it has just decided, which then runs twice."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    if next_slot > now:
        return found
    return dataclasses.replace(found, next_slot=next(cadence.slots_before(found.next_slot)))


def latest_runs_the_newest_two(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """``latest`` that keeps one slot too many."""
    if catch_up is not CatchUp.LATEST:
        return plan(cadence, next_slot, now, catch_up, limit=limit)
    found = plan(cadence, next_slot, now, CatchUp.ALL, limit=2)
    return dataclasses.replace(found, run=found.run[-2:])


def all_runs_the_oldest(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """``all`` that keeps the oldest ``limit`` slots: the slots closest to now are the ones dropped."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    if catch_up is not CatchUp.ALL or not found.run:
        return found
    due = list(takewhile(lambda slot: slot <= now, cadence.slots_after(next_slot - timedelta.resolution)))
    return dataclasses.replace(found, run=tuple(due[: len(found.run)]))


def none_ignores_the_grace(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """``none`` that runs the newest due slot however late it is seen: ``latest`` under another name."""
    if catch_up is CatchUp.NONE:
        catch_up = CatchUp.LATEST
    return plan(cadence, next_slot, now, catch_up, limit=limit)


def counts_a_slot_not_yet_due(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Counts the coming slot as dropped when nothing is due (a look before the slot)."""
    found = plan(cadence, next_slot, now, catch_up, limit=limit)
    if next_slot <= now:
        return found
    return dataclasses.replace(found, dropped=1, first_dropped=next_slot, last_dropped=next_slot)


def enumerates_every_due_slot(
    cadence: Cadence, next_slot: datetime, now: datetime, catch_up: CatchUp, *, limit: int = 1
) -> SlotPlan:
    """Lists every due slot before deciding: the work grows with the downtime, not bounded."""
    list(takewhile(lambda slot: slot <= now, cadence.slots_after(next_slot - timedelta.resolution)))
    return plan(cadence, next_slot, now, catch_up, limit=limit)


@dataclasses.dataclass(frozen=True)
class FloatingCadence(Cadence):
    """Interval slots counted from the moment asked about instead of the epoch: no two workers agree."""

    def slots_after(self, moment: datetime) -> Iterator[datetime]:
        if self.every is None:
            yield from super().slots_after(moment)
            return
        slot = moment
        while True:
            slot += self.every
            yield slot

    def slots_before(self, moment: datetime) -> Iterator[datetime]:
        if self.every is None:
            yield from super().slots_before(moment)
            return
        slot = moment
        while True:
            slot -= self.every
            yield slot


class OverBudget(AssertionError):
    """A plan read more slots than its budget."""


@dataclasses.dataclass(frozen=True)
class CountingCadence(Cadence):
    """A cadence that counts the slots read from it and stops a plan that reads more than ``budget``."""

    budget: int = 0
    read: list[int] = dataclasses.field(default_factory=lambda: [0], compare=False)

    def slots_after(self, moment: datetime) -> Iterator[datetime]:
        for slot in super().slots_after(moment):
            self._count()
            yield slot

    def slots_before(self, moment: datetime) -> Iterator[datetime]:
        for slot in super().slots_before(moment):
            self._count()
            yield slot

    def _count(self) -> None:
        self.read[0] += 1
        if self.read[0] > self.budget:
            raise OverBudget(f"read more than {self.budget} slots")
