"""A policy's snooze budget: how often one job may put itself aside, and for how long in all.

``raise Snooze(delay)`` and ``raise CircuitOpen(for_=...)`` give the
attempt back, so they need a bound of their own, or a job waiting for
something that never comes would never end. The bound is a count
(``max_snoozes``), a time (``snooze_for``: the delays added up), or both,
the first one spent ending the job as ``snooze_budget``. A time fits an
outage: ``Snooze(5)`` through six hours is 4,320 snoozes, which no count
chosen in advance describes.
"""

from __future__ import annotations

from datetime import timedelta

from django_jobretry.policy.base import InvalidPolicy
from django_jobretry.policy.durations import MAX_BUDGET, to_timedelta

#: Most snoozes a policy may allow one job: a job snoozing more often is waiting for something else.
MAX_SNOOZES = 100_000
#: ``max_snoozes`` when a policy sets neither it nor ``snooze_for``.
DEFAULT_SNOOZES = 20


def snooze_budget(max_snoozes: object, snooze_for: object) -> tuple[int, timedelta | None]:
    """The count and the time a policy allows, validated; InvalidPolicy names the bad one.

    ``max_snoozes`` None: 20, or, with a ``snooze_for``, as many as
    :data:`MAX_SNOOZES` (the time is the budget then, not the count).
    """
    time = None if snooze_for is None else to_timedelta("snooze_for", snooze_for, maximum=MAX_BUDGET)
    if max_snoozes is None:
        return (DEFAULT_SNOOZES if time is None else MAX_SNOOZES), time
    if isinstance(max_snoozes, bool) or not isinstance(max_snoozes, int):
        raise InvalidPolicy("max_snoozes", max_snoozes, f"an integer from 0 to {MAX_SNOOZES}")
    if not 0 <= max_snoozes <= MAX_SNOOZES:
        raise InvalidPolicy("max_snoozes", max_snoozes, f"an integer from 0 to {MAX_SNOOZES}")
    return max_snoozes, time
