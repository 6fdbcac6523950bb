"""Issue 21's acceptance with real `manage.py runworker` processes: pauses hold, breakers bound an outage.

The downstream of tests/jobs_app/jobs.py fails while a flag row exists,
so an outage starts and ends when the test says, never by the clock. Each
wait polls the database with a hard deadline. Workers run with a 1 s lease:
they heartbeat (and so move breakers on) three times a second.
"""

from __future__ import annotations

import re
import signal
import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from django_jobretry.decorators import JobDefinition
from django_jobretry.holds import breakers, pauses
from django_jobretry.models import Circuit, CircuitState, DeadLetter, Job, JobStatus, Pause
from tests.jobs_app import jobs
from tests.jobs_app.models import Execution
from tests.processes import Running, Workers, db_now, owner_pid, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

#: Two workers of two runners each: at most four attempts in flight at once.
WORKERS, CONCURRENCY = 2, 2
WORKER_ARGS = ("--concurrency", str(CONCURRENCY), "--lease", "1", "--no-schedules")


def flag(key: str, *, on: bool) -> None:
    if on:
        Execution.objects.create(key=key, attempt=0, pid=0)
    else:
        Execution.objects.filter(key=key).delete()


def executions(suffix: str = "") -> Counter[str]:
    """Calls recorded per key, of the keys ending in ``suffix`` (a success records the bare key)."""
    keys = Execution.objects.exclude(key__in=[jobs.DOWNSTREAM_DOWN, jobs.DOWNSTREAM_HANGS])
    return Counter(key for key in keys.values_list("key", flat=True) if key.endswith(suffix))


def all_succeeded(task: str, count: int) -> bool:
    return Job.objects.filter(task_name=task, status=JobStatus.SUCCEEDED).count() == count


def test_a_paused_task_starts_no_attempt_until_resumed_then_each_job_runs_once(workers: Workers) -> None:
    paused = jobs.record.name
    assert pauses.pause(task=paused, actor="ops", reason="migration")
    jobs.record.bulk_enqueue([((f"held-{n}",), {}) for n in range(1000)])
    jobs.other_queue.bulk_enqueue([((f"other-{n}",), {}) for n in range(40)])
    running = Running(workers, WORKERS, *WORKER_ARGS, "--concurrency", "8")
    running.wait(lambda: all_succeeded(jobs.other_queue.name, 40), "the other task's jobs", timeout=30)
    # Both workers claim again after those: each enqueued job below is claimed past the 1,000 held ones.
    jobs.other_queue.bulk_enqueue([((f"late-{n}",), {}) for n in range(8)])
    running.wait(lambda: all_succeeded(jobs.other_queue.name, 48), "the late jobs", timeout=30)

    held = Job.objects.filter(task_name=paused)
    assert held.filter(status=JobStatus.READY, attempts=0).count() == 1000
    assert not held.exclude(status=JobStatus.READY).exists()
    assert not Execution.objects.filter(key__startswith="held-").exists()

    ended = pauses.resume(task=paused, actor="ops")
    assert ended is not None
    assert ended.held == 1000
    running.wait(lambda: all_succeeded(paused, 1000), "the 1,000 released jobs", timeout=40)
    running.stop()
    assert set(held.values_list("attempts", flat=True)) == {1}
    calls = executions()
    assert sum(1 for key in calls if key.startswith("held-")) == 1000
    assert {n for key, n in calls.items() if key.startswith("held-")} == {1}
    assert DeadLetter.objects.count() == 0


PROBE_FAILED = re.compile(r"circuit of task \S+ open until .*: probe job \d+ failed")


def run_an_outage(workers: Workers, task: JobDefinition[Any], *, until: Callable[[], bool]) -> str:
    """20 jobs of ``task`` against a downstream that is down until ``until()`` is true, then up again."""
    flag(jobs.DOWNSTREAM_DOWN, on=True)
    task.bulk_enqueue([((f"{task.func.__name__}-{n}",), {}) for n in range(20)])
    running = Running(workers, WORKERS, *WORKER_ARGS)
    running.wait(until, "the outage to run its course", timeout=30)
    flag(jobs.DOWNSTREAM_DOWN, on=False)
    wait_until(
        lambda: not Job.objects.filter(task_name=task.name).exclude(status=JobStatus.SUCCEEDED).exists(),
        timeout=30,
        what="every job of the outage to end",
    )
    return running.stop()


def test_a_breaker_bounds_the_attempts_an_outage_costs_and_without_it_jobs_die(workers: Workers) -> None:
    bare, guarded = jobs.bare_call, jobs.guarded_call
    started = db_now()
    run_an_outage(workers, bare, until=lambda: DeadLetter.objects.filter(task_name=bare.name).count() == 20)
    outage = db_now() - started
    assert DeadLetter.objects.filter(task_name=bare.name).count() == 20
    assert sum(executions(":down").values()) == 20 * bare.policy.max_attempts

    Execution.objects.all().delete()
    breaker = guarded.policy.circuit
    assert breaker is not None
    started = db_now()

    def reopened_and_as_long() -> bool:
        """Down at least as long as the bare run was, and a probe failed (the breaker reopened)."""
        row = Circuit.objects.filter(task_name=guarded.name).first()
        return row is not None and row.opens >= 2 and db_now() - started >= outage

    output = run_an_outage(workers, guarded, until=reopened_and_as_long)
    assert DeadLetter.objects.filter(task_name=guarded.name).count() == 0
    successes = {key: n for key, n in executions().items() if ":" not in key}
    assert successes == {f"guarded_call-{n}": 1 for n in range(20)}
    probes_failed = len(PROBE_FAILED.findall(output))
    assert probes_failed >= 1, output
    spent = sum(executions(":down").values())
    # The threshold, the attempts already in flight when it opened, and a probe per reopening
    # (and the one probe that may have been running when the downstream came back).
    assert breaker.failures <= spent <= breaker.failures + WORKERS * CONCURRENCY + probes_failed + 1, output
    assert Circuit.objects.get(task_name=guarded.name).state == CircuitState.CLOSED


def test_a_probe_failure_reopens_longer_and_a_probe_success_releases_the_held_jobs(workers: Workers) -> None:
    task = jobs.guarded_call
    flag(jobs.DOWNSTREAM_DOWN, on=True)
    task.bulk_enqueue([((f"held-{n}",), {}) for n in range(12)])
    running = Running(workers, WORKERS, *WORKER_ARGS)
    circuit = Circuit.objects.filter(task_name=task.name)
    running.wait(lambda: circuit.filter(opens=1, state=CircuitState.OPEN).exists(), "the breaker to open")
    assert circuit.get().cooldown_seconds == pytest.approx(0.3)
    running.wait(lambda: circuit.filter(opens=2).exists(), "a probe to fail")
    row = circuit.get()
    assert row.state == CircuitState.OPEN
    assert row.cooldown_seconds == pytest.approx(0.6)
    flag(jobs.DOWNSTREAM_DOWN, on=False)
    running.wait(lambda: all_succeeded(task.name, 12), "the held jobs to be released", timeout=30)
    output = running.stop()
    row = circuit.get()
    assert (row.state, row.opens, row.probe_job_id) == (CircuitState.CLOSED, 0, None)
    assert re.search(r"closed: probe job \d+ succeeded; 11 held job\(s\) released", output), output
    assert DeadLetter.objects.count() == 0


def test_a_worker_killed_running_the_probe_leaves_no_stuck_breaker_and_no_job_lost(workers: Workers) -> None:
    task = jobs.guarded_call
    task.bulk_enqueue([((f"job-{n}",), {}) for n in range(10)])
    breaker = task.policy.circuit
    with transaction.atomic():
        breakers.hold_task(task.name, timedelta(seconds=0.5), breaker, job_id=0)
    flag(jobs.DOWNSTREAM_HANGS, on=True)
    running = Running(workers, WORKERS, *WORKER_ARGS)
    hung = Execution.objects.filter(key__endswith=":hung")
    running.wait(hung.exists, "the probe to start", timeout=30)
    probe_id = Circuit.objects.get(task_name=task.name).probe_job_id
    assert probe_id is not None
    probe = Job.objects.get(pk=probe_id)
    victim = next(p for p in running.processes if p.pid == owner_pid(probe.lease_owner))
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    flag(jobs.DOWNSTREAM_HANGS, on=False)
    assert Job.objects.filter(task_name=task.name, status=JobStatus.RUNNING).count() == 1  # the probe only

    running.wait(lambda: all_succeeded(task.name, 10), "the breaker to close and jobs to run", timeout=40)
    running.stop()
    assert Circuit.objects.get(task_name=task.name).state == CircuitState.CLOSED
    calls = executions()
    assert hung.count() == 1
    assert {key for key in calls if not key.endswith(":hung")} == {f"job-{n}" for n in range(10)}
    assert set(calls.values()) == {1}  # each succeeded once; the probe's killed call is its ":hung"
    assert DeadLetter.objects.count() == 0


def test_two_operators_pausing_and_resuming_at_once_lose_no_job_and_run_none_twice(workers: Workers) -> None:
    """Two threads, each on its own connection, pause and resume one task at the same instants (a barrier)
    while two workers claim its jobs: each pause is created once, each resume ends it once."""
    task = jobs.record.name
    jobs.record.bulk_enqueue([((f"stormed-{n}",), {}) for n in range(300)])
    rounds, barrier = 15, threading.Barrier(2, timeout=30)
    created: list[bool] = []
    ended: list[pauses.Ended | None] = []
    failures: list[BaseException] = []

    def operator(name: str) -> None:
        try:
            for _ in range(rounds):
                barrier.wait()
                created.append(pauses.pause(task=task, actor=name, reason="storm"))
                barrier.wait()
                ended.append(pauses.resume(task=task, actor=name))
        except BaseException as error:
            failures.append(error)
            barrier.abort()
        finally:
            connection.close()

    running = Running(workers, WORKERS, *WORKER_ARGS)
    threads = [threading.Thread(target=operator, args=(f"ops-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    assert Counter(created) == {True: rounds, False: rounds}, (
        "each pause is created by exactly one of the two"
    )
    assert sum(1 for end in ended if end is not None) == rounds, (
        "each pause is ended by exactly one of the two"
    )
    assert not Pause.objects.exists()

    running.wait(lambda: all_succeeded(task, 300), "every stormed job to run", timeout=30)
    running.stop()
    assert set(Job.objects.filter(task_name=task).values_list("attempts", flat=True)) == {1}
    assert executions() == Counter({f"stormed-{n}": 1 for n in range(300)})
