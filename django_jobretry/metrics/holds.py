"""The holds' metrics: which queues and tasks are paused, which breakers are open, and what they hold.

Read from the same report as `jobstatus` (services/console/status_holds.py)
at each scrape: a handful of rows, one count query each. Series exist only
while something is held, so a paused queue or an open breaker is an alert
rule on the series' presence or value (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from django_jobretry.services.console.status_holds import holds_report


def collect() -> Iterator[Metric]:
    """``jobretry_paused``, ``jobretry_circuit_open`` and ``jobretry_held_jobs``."""
    paused = GaugeMetricFamily(
        "jobretry_paused",
        "1 for each queue or task an operator has paused (kind: queue or task).",
        labels=["kind", "name"],
    )
    circuit = GaugeMetricFamily(
        "jobretry_circuit_open",
        "1 for each task whose circuit breaker is open or half-open (state), with no series when closed.",
        labels=["task_name", "state"],
    )
    held = GaugeMetricFamily(
        "jobretry_held_jobs",
        "Ready jobs held by a pause (kind queue or task) or a breaker (kind circuit), by what holds them.",
        labels=["kind", "name"],
    )
    report = holds_report()
    for pause in report.pauses:
        paused.add_metric([pause.kind, pause.name], 1)
        held.add_metric([pause.kind, pause.name], pause.held)
    for line in report.circuits:
        circuit.add_metric([line.task_name, line.state], 1)
        held.add_metric(["circuit", line.task_name], line.held)
    yield from (paused, circuit, held)
