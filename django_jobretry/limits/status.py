"""Every declared limit right now, for operators, and how it shows: `jobstatus`, the metrics, the dashboard.

One line per limited task and per limited queue (limits/__init__.py): how many
of its jobs run (a slot each), its limit, and how many due jobs wait in its
lanes: ready, ``run_at`` passed, not claimed because the limit is full (or
not claimed yet), and since when the oldest of them waits. A per-key limit
also says how many keys run, how many run as many as the limit allows, how
many wait, and names the keys with the most waiting. Two index-backed
queries per line, three for a per-key limit.

Every face reads that one report (:func:`limits_report`), so the numbers
agree: `jobstatus`' Limits section and JSON, the metrics and the dashboard's
Limits panel. The metrics report a per-key limit's jobs summed over the keys
(``per_key="true"``); keys are not labels, since one series per tenant
would grow without bound. `jobstatus` imports this module without the admin
or prometheus_client installed: each is imported by the face that needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Min, Q

from django_jobretry.display import printable
from django_jobretry.limits import queue_limits, task_limits
from django_jobretry.models import Job, JobStatus
from django_jobretry.models.job_states import WAITING_FOR_SLOT
from django_jobretry.policy.limits import PERIODS, Limit

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from django_jobretry.features import Page

#: Keys named per per-key limit: the ones with the most due jobs waiting.
TOP_KEYS = 3


@dataclass(frozen=True)
class LimitLine:
    kind: str  # "task" or "queue"
    name: str
    #: At most this many at once (per key when ``per_key``); None: a rate only.
    concurrency: int | None
    per_key: bool
    #: The rate as declared, e.g. "60/s (burst 1)"; "" for none.
    rate: str
    running: int
    held: int
    #: Per-key limits: keys with a running job, keys with due jobs waiting, the busiest waiting keys.
    keys_running: int = 0
    keys_held: int = 0
    top_keys: list[tuple[str, int]] = field(default_factory=list)
    #: Per-key limits: keys running as many jobs as the limit allows (no job of theirs is claimed now).
    keys_full: int = 0
    #: The ``run_at`` of the longest-waiting due job: how long the limit has held work back.
    waiting_since: datetime | None = None

    @property
    def full(self) -> bool:
        """Whether the limit holds jobs back now: every slot taken, or (per key) some key's."""
        if self.per_key:
            return self.keys_full > 0
        return self.concurrency is not None and self.running >= self.concurrency

    @property
    def declared(self) -> str:
        """ "4 at once", "1 at once per key; 60/s (burst 1)": the limit as declared, in words."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"{self.concurrency} at once" + (" per key" if self.per_key else ""))
        if self.rate:
            parts.append(self.rate)
        return "; ".join(parts)


def limits_report() -> list[LimitLine]:
    """One line per declared limit, tasks first, each kind by name."""
    lines = [_line("task", name, limit, Q(task_name=name)) for name, limit in sorted(task_limits().items())]
    lines += [
        _line("queue", name, limit, Q(queue_name=name)) for name, limit in sorted(queue_limits().items())
    ]
    return lines


def _line(kind: str, name: str, limit: Limit, scope: Q) -> LimitLine:
    jobs = Job.objects.filter(scope)
    running = jobs.filter(status=JobStatus.RUNNING)
    waiting = jobs.filter(WAITING_FOR_SLOT)
    line = LimitLine(
        kind, name, limit.concurrency, limit.concurrency_key is not None, _rate(limit), running.count(), 0
    )
    if not line.per_key:
        found = waiting.aggregate(n=Count("id"), since=Min("run_at"))
        return replace(line, held=found["n"], waiting_since=found["since"])
    per_key = list(
        waiting.values("limit_lane").annotate(n=Count("id"), since=Min("run_at")).order_by("-n", "limit_lane")
    )
    busy = [row["n"] for row in running.values("limit_lane").annotate(n=Count("id")).order_by()]
    return replace(
        line,
        held=sum(row["n"] for row in per_key),
        waiting_since=min((row["since"] for row in per_key), default=None),
        keys_running=len(busy),
        keys_full=sum(1 for n in busy if limit.concurrency is not None and n >= limit.concurrency),
        keys_held=len(per_key),
        top_keys=[(_key(row["limit_lane"]), row["n"]) for row in per_key[:TOP_KEYS]],
    )


def _key(lane: str | None) -> str:
    return (lane or "").removeprefix("key:")


def _rate(limit: Limit) -> str:
    if limit.rate is None:
        return ""
    unit = next(letter for letter, seconds in PERIODS.items() if seconds == limit.rate.period)
    return f"{limit.rate.count}/{unit} (burst {limit.rate.burst})"


# -- the faces: `jobstatus`, the metrics, the dashboard ----------------------------------------------


def status_lines(lines: list[LimitLine]) -> list[str]:
    """The Limits section, one line per declared limit; none when no limit is declared."""
    if not lines:
        return []
    out = ["Limits (running / limit, due jobs held):"]
    for line in lines:
        name = printable(line.name, one_line=True)
        limit = "-" if line.concurrency is None else str(line.concurrency)
        text = f"  {line.kind} {name}: {line.running} / {limit}{' per key' if line.per_key else ''}"
        text += f", {line.held} held"
        if line.rate:
            text += f", rate {line.rate}"
        if line.per_key:
            text += f"; {line.keys_running} keys running, {line.keys_held} waiting"
            if line.top_keys:
                busiest = ", ".join(f"{printable(key, one_line=True)} ({n})" for key, n in line.top_keys)
                text += f" (most waiting: {busiest})"
        out.append(text)
    return out


def as_json(lines: list[LimitLine]) -> list[dict[str, Any]]:
    """Each line's fields; ``waiting_since`` in ISO 8601 with its offset (null when nothing waits)."""
    return [
        {
            **vars(line),
            "top_keys": [list(pair) for pair in line.top_keys],
            "waiting_since": line.waiting_since.isoformat() if line.waiting_since else None,
        }
        for line in lines
    ]


def collect() -> Iterator[Metric]:
    """``jobretry_limit_running``, ``jobretry_limit_concurrency`` and ``jobretry_limit_held_jobs``."""
    from prometheus_client.core import GaugeMetricFamily  # the optional extra: only a scrape needs it

    labels = ["kind", "name", "per_key"]
    running = GaugeMetricFamily(
        "jobretry_limit_running", "Running jobs under a declared limit.", labels=labels
    )
    limit = GaugeMetricFamily(
        "jobretry_limit_concurrency",
        "A declared concurrency limit (per key when per_key is true).",
        labels=labels,
    )
    held = GaugeMetricFamily(
        "jobretry_limit_held_jobs", "Due ready jobs waiting in a declared limit's lanes.", labels=labels
    )
    for line in limits_report():
        values = [line.kind, line.name, "true" if line.per_key else "false"]
        running.add_metric(values, line.running)
        held.add_metric(values, line.held)
        if line.concurrency is not None:
            limit.add_metric(values, line.concurrency)
    yield from (running, limit, held)


def limits_panel(page: Page) -> dict[str, Any] | None:
    """Every declared limit: running / limit, keys at their limit, jobs waiting; None without limits.

    A key is made of a job's arguments (``concurrency_key="tenant:{tenant_id}"``),
    so the busiest keys are named only to holders of ``view_job_payload``.
    """
    from django_jobretry.admin.rendering import PAYLOAD_PERMISSION  # the admin: only the dashboard needs it

    limits = page.read(limits_report)
    if not limits:
        return None
    return {
        "rows": [{"line": line, "limit": line.declared} for line in limits],
        "full": sum(1 for line in limits if line.full),
        "waiting": sum(line.held for line in limits),
        "show_keys": page.request.user.has_perm(PAYLOAD_PERMISSION),
    }
