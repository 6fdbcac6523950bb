"""The schedules' metrics: when each last succeeded, its next slot, its period, its slots and its pause.

Read with one query for all schedule rows (services/console/status_schedules.py),
at each scrape. Only schedules with a row are shown: the row is the state
every worker shares; a declaration no worker has started has no slots yet.
The period is exported so that "no success for longer than two periods"
is one alert rule for every schedule (docs/metrics.md), whatever its cadence.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from django_jobretry.services.console import status_schedules

#: The outcomes of ``jobretry_schedule_slots_total``, by the row's count each reads.
SLOT_OUTCOMES = {"run": "runs", "skipped": "skipped", "missed": "missed", "refused": "refused"}


def collect() -> Iterator[Metric]:
    """Every schedule metric, labelled by the schedule's name."""
    success = GaugeMetricFamily(
        "jobretry_schedule_last_success_timestamp_seconds",
        "When a run of the schedule last succeeded (Unix time); absent until one has.",
        labels=["schedule"],
    )
    next_slot = GaugeMetricFamily(
        "jobretry_schedule_next_slot_timestamp_seconds",
        "The schedule's next slot not decided yet (Unix time); in the past while paused or not run.",
        labels=["schedule"],
    )
    period = GaugeMetricFamily(
        "jobretry_schedule_period_seconds",
        "The longer of the schedule's current period and the one before; absent when not declared here.",
        labels=["schedule"],
    )
    slots = CounterMetricFamily(
        "jobretry_schedule_slots",
        "Slots of the schedule by what became of them: run, skipped (overlap), missed (catch-up), refused.",
        labels=["schedule", "outcome"],
    )
    paused = GaugeMetricFamily(
        "jobretry_schedule_paused",
        "1 while an operator has the schedule paused, else 0.",
        labels=["schedule"],
    )
    _, states = status_schedules.listing()
    for state in states:
        if not state.has_row or state.next_slot is None:
            continue
        name = [state.name]
        if state.last_success_at is not None:
            success.add_metric(name, state.last_success_at.timestamp())
        next_slot.add_metric(name, state.next_slot.timestamp())
        if state.period is not None:
            period.add_metric(name, state.period.total_seconds())
        for outcome, field in SLOT_OUTCOMES.items():
            slots.add_metric([state.name, outcome], getattr(state, field))
        paused.add_metric(name, 0 if state.paused_at is None else 1)
    yield from (success, next_slot, period, slots, paused)
