"""Chapter 7 of `manage.py demo`: a partner outage, ridden out by the circuit breaker.

The partner (shop/partner.py) refuses connections for OUTAGE_SECONDS. Alone,
the "partner" policy's four attempts would be spent in 1.5 s and every job
would die; its breaker (settings.py) opens after three refused connections,
holds the task without spending attempts, probes with one job once its
cooldown is over, and lets the held jobs go once a probe succeeds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.core.management.base import BaseCommand

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.display import humanize_delay
from django_jobretry.management.commands.showpolicies import describe, render_rules
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.worker import WorkerOptions
from example_project.shop import jobs, partner
from example_project.shop.demo.running import run_worker_until

OUTAGE_SECONDS = 3.0
ORDERS = range(2001, 2007)
#: A heartbeat a second (a third of the lease): the breaker moves on at the heartbeat.
LEASE_SECONDS = 3.0


class BreakerLog:
    """The breaker's signals for ``task_name`` while connected, with the seconds since the outage began."""

    def __init__(self, task_name: str) -> None:
        self.task_name, self.started = task_name, time.monotonic()
        self.events: list[tuple[float, str]] = [(OUTAGE_SECONDS, "the partner answers again")]
        self.openings = 0
        self._lock = threading.Lock()

    def lines(self) -> list[str]:
        with self._lock:
            return [f"{seconds:4.1f}s  {event}" for seconds, event in sorted(self.events)]

    def connect(self) -> None:
        signals.circuit_opened.connect(self.opened)
        signals.circuit_half_open.connect(self.half_open)
        signals.circuit_closed.connect(self.on_closed)

    def disconnect(self) -> None:
        signals.circuit_opened.disconnect(self.opened)
        signals.circuit_half_open.disconnect(self.half_open)
        signals.circuit_closed.disconnect(self.on_closed)

    def opened(self, task_name: str, opens: int, reason: str, **kwargs: Any) -> None:
        if task_name == self.task_name:
            self._add(f"open (opening {opens} in a row): {reason}", opened=True)

    def half_open(self, task_name: str, probe_job_id: int, **kwargs: Any) -> None:
        if task_name == self.task_name:
            self._add(f"half-open: job {probe_job_id} is the probe")

    def on_closed(self, task_name: str, released: int, **kwargs: Any) -> None:
        if task_name == self.task_name:
            self._add(f"closed: {released} held job(s) released")

    def _add(self, line: str, *, opened: bool = False) -> None:
        with self._lock:  # the heartbeat and the main loop of the worker both send these
            self.events.append((time.monotonic() - self.started, line))
            self.openings += opened


def tell(command: BaseCommand) -> None:
    """Take the partner down, enqueue the orders, run a worker until each is final, and say what happened."""
    write = command.stdout.write
    write("\n" + command.style.MIGRATE_HEADING("7. A partner outage, ridden out by the circuit breaker"))
    policy = jobretry_settings.policies["partner"]
    write(f"   Policy 'partner': {describe(policy)}")
    write(f"   {render_rules(policy)[-2].strip()}")
    write(
        f"   The partner refuses connections for the next {OUTAGE_SECONDS:g}s. The worker's heartbeat\n"
        f"   (every {LEASE_SECONDS / 3:g}s here) moves the breaker on, so it acts up to a beat late.\n"
    )
    ids = [jobs.sync_order.enqueue(order).pk for order in ORDERS]
    live = Job.objects.filter(pk__in=ids, status__in=[JobStatus.READY, JobStatus.RUNNING])
    log = BreakerLog(jobs.sync_order.name)
    partner.take_down(OUTAGE_SECONDS)  # as the worker starts, so the outage lasts into its first claims
    log.connect()
    try:
        run_worker_until(
            lambda: not live.exists(),
            WorkerOptions(queues=["demo"], concurrency=3, lease_seconds=LEASE_SECONDS, schedules=False),
            "the orders to be synced",
        )
    finally:
        log.disconnect()
    write("\n   What the breaker did, in seconds since the outage began:")
    for line in log.lines():
        write(f"   {line}")
    finished = list(Job.objects.filter(pk__in=ids).order_by("pk"))
    dead = DeadLetter.objects.filter(job_id__in=ids).count()
    write(f"\n   {'job':>5}  {'order':>5}  {'attempts':>8}  {'held':>5}  status")
    for job in finished:
        write(f"   {job.pk:>5}  {job.args[0]:>5}  {job.attempts:>8}  {job.held_seconds:>4.1f}s  {job.status}")
    succeeded = sum(1 for job in finished if job.status == JobStatus.SUCCEEDED)
    write(
        f"\n   Retried alone, an order spends its {policy.max_attempts} attempts within "
        f"{humanize_delay(policy.worst_case_total())} and dies before\n"
        "   the partner is back. The breaker held the task instead: a held job spends no attempt.\n"
        "   'held' is how long a job that had started waited, held; it does not count against retry_for."
    )
    write(
        f"\n   orders synced: {succeeded} of {len(ids)}   dead letters: {dead}   "
        f"attempts spent: {sum(job.attempts for job in finished)}   breaker openings: {log.openings}"
    )
