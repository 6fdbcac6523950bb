"""The flows now, for operators: `jobstatus`' Flows section and its JSON, and the ``jobretry_flows`` metric.

One read (:func:`flows_report`) serves both faces, so they agree: how many
flows are in each state, and the blocked ones, oldest first, each with the
dead letter that blocks it (a requeue or a discard of it moves the flow on,
docs/dead-letters.md). Completed and cancelled flows stay until
`prunejobs` removes them with their jobs, so every count is an index walk
on ``(state, created_at)`` that stops after ``console.COUNT_LIMIT`` rows,
as the queue counts do, and only the :data:`BLOCKED_SHOWN` oldest blocked
flows are named. prometheus_client, an optional extra, is imported only by
a scrape.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from django_jobretry import console
from django_jobretry.console import Count, counted
from django_jobretry.display import table
from django_jobretry.models import Flow, FlowState

if TYPE_CHECKING:
    from prometheus_client.core import Metric

#: Blocked flows named by `jobstatus`: the ones blocked longest.
BLOCKED_SHOWN = 20

FLOW = Flow._meta.db_table

_COUNTS_SQL = "SELECT " + ", ".join(
    counted(f"{FLOW} WHERE state = '{state}'", "state, created_at") for state in FlowState.values
)


@dataclass(frozen=True)
class BlockedFlow:
    """A blocked flow: which dead letter blocks it, since when."""

    flow_id: int
    name: str
    blocked_by: int | None
    blocked_at: datetime | None


@dataclass(frozen=True)
class FlowsReport:
    """Flows by state (every state, 0 included) and the blocked ones named, oldest first."""

    counts: dict[str, Count]
    blocked: list[BlockedFlow]

    @property
    def any(self) -> bool:
        return any(count.value for count in self.counts.values())


def flows_report() -> FlowsReport:
    """Two statements: the capped count of each state, and the :data:`BLOCKED_SHOWN` oldest blocked flows."""
    with console.index_walks() as cursor:
        cursor.execute(_COUNTS_SQL, {"cap": console.COUNT_LIMIT + 1})
        row = cursor.fetchone()
        oldest = Flow.objects.filter(state=FlowState.BLOCKED).order_by("blocked_at", "pk")
        fields = ("pk", "name", "blocked_by", "blocked_at")
        blocked = [BlockedFlow(*found) for found in oldest.values_list(*fields)[:BLOCKED_SHOWN]]
    counts = {state: Count.capped(n) for state, n in zip(FlowState.values, row, strict=True)}
    return FlowsReport(counts, blocked)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _clock(value: datetime | None) -> str:
    return "-" if value is None else timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def as_json(report: FlowsReport) -> dict[str, Any]:
    """`jobstatus --json`'s "flows": a count per state, which stopped at the limit, the oldest blocked."""
    return {
        **{state: count.value for state, count in report.counts.items()},
        "more_than_limit": [state for state, count in report.counts.items() if count.more],
        "blocked_flows": [
            {
                "flow_id": line.flow_id,
                "name": line.name,
                "blocked_by": line.blocked_by,
                "blocked_at": _time(line.blocked_at),
            }
            for line in report.blocked
        ],
    }


def status_lines(report: FlowsReport) -> list[str]:
    """The Flows section: the counts, then the blocked flows and their dead letters; none without flows."""
    if not report.any:
        return []
    counts = ", ".join(f"{count} {state}" for state, count in report.counts.items())
    lines = [f"Flows: {counts}"]
    if report.blocked:
        blocked = report.counts[FlowState.BLOCKED]
        if len(report.blocked) < (blocked.value or 0) or blocked.more:
            lines.append(
                f"The {len(report.blocked)} blocked longest (`manage.py flows list --state blocked`):"
            )
        rows = [
            (
                str(line.flow_id),
                line.name,
                "-" if line.blocked_by is None else f"dead letter {line.blocked_by}",
                _clock(line.blocked_at),
            )
            for line in report.blocked
        ]
        lines += table(("flow", "name", "blocked by", "blocked since"), rows, {0})
    return lines


def collect() -> Iterator[Metric]:
    """``jobretry_flows``: flows per state, every state a series (0 included)."""
    from prometheus_client.core import GaugeMetricFamily  # the optional extra: only a scrape needs it

    flows = GaugeMetricFamily(
        "jobretry_flows",
        f"Workflows per state, each count stopping at {console.COUNT_LIMIT:,}.",
        labels=["state"],
    )
    for state, count in flows_report().counts.items():
        flows.add_metric([state], count.value or 0)
    yield flows
