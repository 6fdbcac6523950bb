"""How the limits show: `jobstatus`' Limits section and JSON, the metrics, the dashboard's Limits panel.

Each reads the same report (limits/status.py), so the numbers agree. The
metrics report a per-key limit's jobs summed over the keys
(``per_key="true"``); keys are not labels, since one series per tenant
would grow without bound. `jobstatus` imports this module without the admin
or prometheus_client installed: each is imported by the face that needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django_jobretry.display import printable
from django_jobretry.limits import status
from django_jobretry.limits.status import LimitLine

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from django_jobretry.features import Page


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
    for line in status.limits_report():
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

    limits = page.read(status.limits_report)
    if not limits:
        return None
    return {
        "rows": [{"line": line, "limit": line.declared} for line in limits],
        "full": sum(1 for line in limits if line.full),
        "waiting": sum(line.held for line in limits),
        "show_keys": page.request.user.has_perm(PAYLOAD_PERMISSION),
    }
