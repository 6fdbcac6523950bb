"""The metrics, as a prometheus_client Collector: every figure read from the database at each scrape.

Counters come from the counter table (console/counters.py), so they add
up the events of every process and survive restarts. Gauges come from the
same index walks as the dashboard (console/__init__.py), so a scrape costs
what a dashboard view costs, whatever the backlog: counts stop at
``console.COUNT_LIMIT``, and a ready count that cannot be made cheaply is
left out rather than guessed. Then each capability of features.py adds the
figures of its own ``collect``, in that list's order.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from django_jobretry import console, features
from django_jobretry.console import counters
from django_jobretry.models import CounterEvent, WorkerProcess
from django_jobretry.models.worker_process import LIVE

#: HELP text of each counter, jobretry_jobs_<event>_total.
COUNTER_HELP = {
    CounterEvent.ENQUEUED: "Jobs enqueued (committed).",
    CounterEvent.STARTED: "Attempts whose handler a worker started.",
    CounterEvent.SUCCEEDED: "Attempts that succeeded.",
    CounterEvent.RETRIED: "Failed or interrupted attempts scheduled to run again.",
    CounterEvent.DEAD: "Jobs that became dead letters.",
    CounterEvent.REQUEUED: "Dead letters requeued by an operator or a requeue budget.",
    CounterEvent.DISCARDED: "Dead letters discarded.",
}


class JobRetryCollector(Collector):
    """Yields every django-jobretry metric; registered on a private registry per request."""

    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._queues()
        yield self._workers()
        for feature in features.FEATURES:
            if feature.collect is not None:
                yield from features.load(feature.collect)()

    def _counters(self) -> Iterator[Metric]:
        families = {
            event.value: CounterMetricFamily(f"jobretry_jobs_{event.value}", text, labels=["task", "queue"])
            for event, text in COUNTER_HELP.items()
        }
        for (event, task, queue), value in sorted(counters.totals().items()):
            if event in families:  # a row of a future version's event is not ours to name
                families[event].add_metric([task, queue], value)
        yield from families.values()

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "jobretry_queue_jobs",
            f"Jobs per queue and state, each count stopping at {console.COUNT_LIMIT:,}.",
            labels=["queue", "state"],
        )
        latency = GaugeMetricFamily(
            "jobretry_queue_latency_seconds",
            "How long the oldest due job of the queue has waited past its run_at; 0 when none is due.",
            labels=["queue"],
        )
        for row in console.queues():
            for state, count in (("ready", row.ready), ("retrying", row.retrying), ("dead", row.dead)):
                if count.value is not None:
                    depth.add_metric([row.queue, state], count.value)
            depth.add_metric([row.queue, "running"], row.running)
            latency.add_metric([row.queue], row.oldest_due.total_seconds() if row.oldest_due else 0.0)
        yield depth
        yield latency

    def _workers(self) -> Metric:
        gauge = GaugeMetricFamily(
            "jobretry_workers", "Worker processes in the workers table, live or lost.", labels=["state"]
        )
        # The workers table holds a row per running worker: small, counted whole.
        found = WorkerProcess.objects.aggregate(live=Count("id", filter=LIVE), total=Count("id"))
        gauge.add_metric(["live"], found["live"])
        gauge.add_metric(["lost"], found["total"] - found["live"])
        return gauge
