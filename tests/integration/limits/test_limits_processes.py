"""Issue 23's acceptance with real `manage.py runworker` processes: limits hold across the fleet.

Each limited job (tests/jobs_app/limited_jobs.py) writes a ledger row timed
by the database clock at its start and its end; overlaps and start rates
are read from it. Every wait polls the database with a hard deadline.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime, timedelta

import pytest

from django_jobretry.models import Job, JobStatus
from tests.jobs_app import limited_jobs
from tests.jobs_app.models import LedgerRun
from tests.processes import Running, Workers, owner_pid

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = ("--no-schedules", "--lease", "2")


def most_at_once(runs: list[tuple[datetime, datetime]]) -> int:
    """The most runs in progress at one instant (an end at the instant of a start is not an overlap)."""
    events = sorted([(start, 1) for start, _ in runs] + [(end, -1) for _, end in runs])
    busiest = current = 0
    for _, step in events:
        current += step
        busiest = max(busiest, current)
    return busiest


def ledger(prefix: str = "", *, key: str | None = None) -> list[tuple[datetime, datetime]]:
    """The ended runs whose key starts with ``prefix`` (or is ``key``): (start, end) by the database clock."""
    rows = LedgerRun.objects.filter(key__startswith=prefix, ended_at__isnull=False)
    if key is not None:
        rows = rows.filter(key=key)
    return [(row.started_at, row.ended_at) for row in rows if row.ended_at is not None]


def all_succeeded(task_name: str, count: int) -> bool:
    return Job.objects.filter(task_name=task_name, status=JobStatus.SUCCEEDED).count() == count


def test_a_global_limit_of_three_holds_across_three_workers_of_ten(workers: Workers) -> None:
    task = limited_jobs.three_at_once
    task.bulk_enqueue([((f"g-{n}", 0.3), {}) for n in range(30)])
    running = Running(workers, 3, *ARGS, "--concurrency", "10")
    running.wait(lambda: Job.objects.filter(status=JobStatus.RUNNING).count() == 3, "three running")
    waiting = Job.objects.filter(task_name=task.name, status=JobStatus.READY)
    assert waiting.exists()
    assert not waiting.exclude(attempts=0).exists()  # held: no attempt spent
    # The worker that freed a slot claims again at once, so one worker could take every slot to
    # the end: drain one that holds a slot now (SIGTERM: it stops claiming, finishes its jobs),
    # and the others must take over the remaining slots under the same limit.
    # A worker inside a handler now (its run's ledger row has no end yet), not one whose claimed job
    # has not started: a drained worker gives such a job back unrun, and would then have run nothing.
    inside: list[int] = []

    def a_slot_held() -> bool:
        started = LedgerRun.objects.filter(key__startswith="g-", ended_at=None)
        inside[:] = started.values_list("pid", flat=True)
        return bool(inside)

    running.wait(a_slot_held, "a worker running a job in a slot")
    first = inside[0]
    os.kill(first, signal.SIGTERM)
    running.wait(lambda: all_succeeded(task.name, 30), "all 30 jobs succeeded", timeout=60)
    running.stop()
    runs = ledger("g-")
    assert len(runs) == 30
    assert most_at_once(runs) == 3  # never more, and the limit was reached
    ran = set(LedgerRun.objects.values_list("pid", flat=True))
    assert first in ran  # the drained worker ran jobs...
    assert len(ran) > 1  # ...and so did another


def test_a_per_key_limit_of_one_never_overlaps_a_key_and_serves_every_key(workers: Workers) -> None:
    task = limited_jobs.one_per_tenant
    task.bulk_enqueue([((tenant, 0.05), {}) for _ in range(3) for tenant in range(50)])
    assert Job.objects.filter(limit_lane="key:tenant:7").count() == 3
    running = Running(workers, 3, *ARGS, "--concurrency", "10")
    running.wait(lambda: all_succeeded(task.name, 150), "all 150 jobs succeeded", timeout=90)
    running.stop()
    for tenant in range(50):
        runs = ledger(key=f"tenant-{tenant}")
        assert len(runs) == 3, tenant
        assert most_at_once(runs) == 1, tenant
    assert most_at_once(ledger("tenant-")) > 1  # keys ran side by side
    # Lanes in turn: every tenant's first run started before any tenant's third.
    starts = sorted(LedgerRun.objects.values_list("started_at", "key"))
    seen: dict[str, int] = {}
    for _, key in starts:
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 3:
            assert len(seen) == 50, f"{key} ran a third time before {50 - len(seen)} tenants ran once"


def test_a_killed_workers_three_slots_free_when_its_leases_expire(workers: Workers) -> None:
    task = limited_jobs.three_at_once
    task.bulk_enqueue([((f"k-{n}", 4 if n < 3 else 0.05), {}) for n in range(6)])
    first = Running(workers, 1, *ARGS, "--concurrency", "10")
    first.wait(lambda: Job.objects.filter(status=JobStatus.RUNNING).count() == 3, "three slots taken")
    held = list(Job.objects.filter(status=JobStatus.RUNNING).values_list("pk", flat=True))
    os.kill(owner_pid(Job.objects.get(pk=held[0]).lease_owner), signal.SIGKILL)
    first.stop()  # reaps the killed worker and closes its pipe
    second = Running(workers, 1, *ARGS, "--concurrency", "10")
    quick = Job.objects.filter(task_name=task.name).exclude(pk__in=held)

    def recovered() -> bool:
        # Ran to the end, not only claimed again: a stop while a claimed job has not started yet
        # releases it and gives its attempt back.
        return Job.objects.filter(task_name=task.name, status=JobStatus.SUCCEEDED).count() == 6

    second.wait(recovered, "the killed worker's slots freed and the held jobs ran", timeout=60)
    second.stop()
    assert LedgerRun.objects.filter(key__in=["k-3", "k-4", "k-5"]).count() == 3  # each ran once
    assert not quick.exclude(attempts=1).exists()
    assert Job.objects.filter(pk__in=held, attempts__gte=2).count() == 3  # the lost attempts counted


def test_a_rate_of_sixty_a_second_bounds_every_one_second_window(workers: Workers) -> None:
    task = limited_jobs.sixty_a_second
    task.bulk_enqueue([((f"r-{n}",), {}) for n in range(600)])
    running = Running(workers, 2, *ARGS, "--concurrency", "10")
    running.wait(lambda: all_succeeded(task.name, 600), "all 600 jobs succeeded", timeout=90)
    running.stop()
    starts = sorted(start for start, _ in ledger("r-"))
    assert len(starts) == 600
    # Job.started_at is the claim's statement_timestamp(), the clock the bucket is spent by.
    started = Job.objects.filter(task_name=task.name).values_list("started_at", flat=True)
    claims = sorted(start for start in started if start is not None)
    bound = 60 + 1  # the refill of one second plus the default burst of 1
    end = 0
    for begin, first in enumerate(claims):
        while end < len(claims) and claims[end] < first + timedelta(seconds=1):
            end += 1
        assert end - begin <= bound, f"{end - begin} starts in the second from {first}"
    assert (claims[-1] - claims[0]).total_seconds() >= (600 - bound) / 60  # no faster than the rate allows
