"""The limits' metrics: per declared limit, its running jobs, its limit and the due jobs it holds.

Read from the same report as `jobstatus` (services/console/status_limits.py),
so the numbers agree. A per-key limit reports its jobs summed over the keys
(``per_key="true"``); keys are not labels, since one series per tenant would
grow without bound.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from django_jobretry.services.console.status_limits import limits_report


def collect() -> Iterator[Metric]:
    """``jobretry_limit_running``, ``jobretry_limit_concurrency`` and ``jobretry_limit_held_jobs``."""
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
