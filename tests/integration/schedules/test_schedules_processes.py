"""Periodic schedules with real `manage.py runworker` processes on real PostgreSQL.

Each test counts slots and runs in the database; a deadline only bounds a
test that would otherwise hang. Slots are compared on the database's clock
(the jobs' ``schedule_slot``, ``started_at`` and ``finished_at``, the dead
letters' ``dead_at``), never on the test's.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from django_jobretry.models import DeadLetter, DeadReason, Job, JobStatus, Schedule
from tests.jobs_app.models import Execution
from tests.processes import Workers, finish, spawn, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def schedules_env(**schedules: dict[str, Any]) -> dict[str, str]:
    return {"JOBRETRY_TEST_SCHEDULES": json.dumps(schedules)}


def stop(processes: list[Any]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        code, output = finish(process, timeout=60)
        assert code in (0, -signal.SIGKILL), output


def test_three_workers_run_every_slot_exactly_once_though_one_is_killed(workers: Workers) -> None:
    """A slot a second for 20 slots: no slot lost, none run twice, whichever worker holds the row."""
    # Under overlap "skip" the killed worker's runs would hold the schedule (and skip slots, counted)
    # until their leases are recovered, and by then, past the next slot, they would die rather than
    # retry (retry_until_next_slot): here every slot must run to success.
    tick = {
        **{"task": "tests.jobs_app.jobs.record_run", "every": 1, "catch_up": "all", "overlap": "allow"},
        "retry_until_next_slot": False,
    }
    env = schedules_env(tick=tick)
    processes = [spawn(workers, "--concurrency", "2", "--lease", "2", env=env) for _ in range(3)]
    ticks = Job.objects.filter(schedule_name="tick")
    wait_until(lambda: ticks.count() >= 8, timeout=60, what="8 slots to run")
    processes[0].send_signal(signal.SIGKILL)
    processes[0].communicate(timeout=30)
    wait_until(lambda: ticks.count() >= 20, timeout=60, what="20 slots to run")
    stop(processes[1:])
    # The runs left ready, and the one the kill left running once its lease ran out: a burst
    # worker (which never looks at schedules) runs them.
    held = ticks.filter(status=JobStatus.RUNNING, lease_expires_at__gte=Now())
    wait_until(lambda: not held.exists(), timeout=30, what="the killed worker's lease to run out")
    code, output = finish(spawn(workers, "--burst", env=env), timeout=60)
    assert code == 0, output

    slots = sorted(slot for slot in ticks.values_list("schedule_slot", flat=True) if slot is not None)
    assert len(slots) == len(set(slots)) >= 20
    assert [b - a for a, b in itertools.pairwise(slots)] == [timedelta(seconds=1)] * (len(slots) - 1)
    row = Schedule.objects.get(name="tick")
    assert (row.runs, row.skipped, row.missed, row.refused) == (len(slots), 0, 0, 0)
    # Every run ran and succeeded; only one the kill interrupted may have run twice (at-least-once).
    assert ticks.filter(status=JobStatus.SUCCEEDED).count() == len(slots)
    per_run = Counter(Execution.objects.values_list("key", flat=True))
    assert set(per_run) == {f"run-{pk}" for pk in ticks.values_list("pk", flat=True)}
    assert sum(n - 1 for n in per_run.values()) <= 1


def test_a_run_that_always_fails_dies_before_the_next_slot_and_the_next_slot_runs(workers: Workers) -> None:
    env = schedules_env(doomed={"task": "tests.jobs_app.jobs.always_fails_retryably", "every": 3})
    processes = [spawn(workers, "--concurrency", "2", env=env)]
    dead = DeadLetter.objects.filter(schedule_name="doomed")
    wait_until(lambda: dead.count() >= 2, timeout=60, what="two runs to die")
    stop(processes)

    letters = sorted(dead, key=lambda letter: letter.schedule_slot or letter.dead_at)
    for letter in letters:
        assert letter.schedule_slot is not None
        assert letter.reason == DeadReason.DEADLINE
        assert letter.attempts > 1, "it retried until its window closed"
        assert letter.dead_at < letter.schedule_slot + timedelta(seconds=3), "it died before the next slot"
    first, second = letters[0].schedule_slot, letters[1].schedule_slot
    assert first is not None
    assert second is not None
    assert second - first == timedelta(seconds=3), "the next slot ran"
    assert Schedule.objects.get(name="doomed").skipped == 0


def test_overlap_skip_starts_no_run_while_one_runs_and_counts_the_skipped_slots(workers: Workers) -> None:
    env = schedules_env(
        slow={"task": "tests.jobs_app.jobs.sleepy", "every": 1, "args": ["slow", 3.5], "catch_up": "all"}
    )
    processes = [spawn(workers, "--concurrency", "4", env=env) for _ in range(2)]
    runs = Job.objects.filter(schedule_name="slow")
    wait_until(lambda: runs.filter(status=JobStatus.SUCCEEDED).count() >= 2, timeout=60, what="two slow runs")
    stop(processes)

    done = sorted(runs.filter(status=JobStatus.SUCCEEDED), key=lambda job: job.started_at or job.enqueued_at)
    for earlier, later in itertools.pairwise(done):
        assert earlier.finished_at is not None
        assert later.started_at is not None
        assert later.started_at >= earlier.finished_at, "two runs of one schedule overlapped"
    row = Schedule.objects.get(name="slow")
    assert row.skipped >= 2 * (len(done) - 1), "the slots that fell during a run were counted"
    assert row.runs == runs.count()


def test_after_downtime_latest_runs_once_and_reports_the_collapsed_slots(workers: Workers) -> None:
    """A schedule declared by a worker that stops, moved back 10 slots: the next worker catches up.

    Its slots are 366 days apart, so no slot of its own falls due while the test runs.
    """
    env = schedules_env(rare={"task": "tests.jobs_app.jobs.record_run", "every": 366 * 86400})
    first = spawn(workers, env=env)
    wait_until(lambda: Schedule.objects.filter(name="rare").exists(), timeout=60, what="the row declared")
    stop([first])
    row = Schedule.objects.get(name="rare")
    Schedule.objects.filter(name="rare").update(next_slot=row.next_slot - 10 * timedelta(days=366))

    second = spawn(workers, env=env)
    wait_until(lambda: Schedule.objects.get(name="rare").runs == 1, timeout=60, what="the catch-up run")
    stop([second])
    row = Schedule.objects.get(name="rare")
    assert (row.runs, row.missed, row.skipped) == (1, 9, 0)
    assert [job.schedule_slot for job in Job.objects.filter(schedule_name="rare")] == [
        row.next_slot - timedelta(days=366)
    ]
    assert os.environ.get("JOBRETRY_TEST_SCHEDULES") is None, "the schedules stay in the worker processes"
