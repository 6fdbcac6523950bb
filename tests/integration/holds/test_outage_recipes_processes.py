"""Issue 36's acceptance with real `manage.py runworker` processes: the outage recipes outlast an outage.

The partner of tests/jobs_app/recipe_jobs.py is down while a flag row
exists, so the outage ends when the test says, never by the clock: after
many times what the snooze budget ``max_snoozes`` x the Retry-After (or the
snooze's delay) could pay for. Each wait polls the database with a hard
deadline. Workers run with a 1 s lease: they heartbeat, and so move
breakers on, three times a second.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest

from django_jobretry.models import Circuit, CircuitState, DeadLetter, Job, JobStatus
from django_jobretry.policy.decisions import DEFAULT_SNOOZES
from tests.jobs_app import recipe_jobs
from tests.jobs_app.models import Execution
from tests.processes import Running, Workers, db_now

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 2
WORKER_ARGS = ("--concurrency", "2", "--lease", "1", "--no-schedules")
JOBS = 5


def partner(*, down: bool) -> None:
    if down:
        Execution.objects.create(key=recipe_jobs.PARTNER_DOWN, attempt=0, pid=0)
    else:
        Execution.objects.filter(key=recipe_jobs.PARTNER_DOWN).delete()


def all_succeeded(task: str) -> bool:
    return Job.objects.filter(task_name=task, status=JobStatus.SUCCEEDED).count() == JOBS


def died() -> bool:
    """A job is a dead letter: the wait ends at once, and the test fails saying so."""
    return DeadLetter.objects.exists()


def successes(prefix: str) -> Counter[str]:
    """Calls that went through, per job key (a call while down records ``KEY:503`` or ``KEY:snoozed``)."""
    keys = Execution.objects.filter(key__startswith=prefix).values_list("key", flat=True)
    return Counter(key for key in keys if ":" not in key)


def test_circuit_open_with_the_retry_after_rides_out_an_outage_and_the_probes_take_turns(
    workers: Workers,
) -> None:
    task = recipe_jobs.calls_with_retry_after
    budget = task.policy.max_snoozes
    # Every job's CircuitOpen before the breaker held them may open it once; past those, each opening
    # is a probe's answer, more of them than the budgets of all the jobs together could pay for.
    openings = JOBS + JOBS * budget + 3
    partner(down=True)
    task.bulk_enqueue([((f"call-{n}",), {}) for n in range(JOBS)])
    started = db_now()
    running = Running(workers, WORKERS, *WORKER_ARGS)
    circuit = Circuit.objects.filter(task_name=task.name)
    running.wait(lambda: circuit.filter(opens__gte=openings).exists() or died(), f"{openings} openings", 90)
    down_for = db_now() - started
    assert not died(), running.stop()[-4000:]
    partner(down=False)
    running.wait(lambda: all_succeeded(task.name), "every job to succeed with the partner back", timeout=30)
    output = running.stop()

    assert down_for > timedelta(seconds=JOBS * budget * recipe_jobs.RETRY_AFTER)
    assert DeadLetter.objects.count() == 0, output[-4000:]
    assert successes("call-") == {f"call-{n}": 1 for n in range(JOBS)}
    rows = list(Job.objects.filter(task_name=task.name))
    # From the attempt history: how often each job answered CircuitOpen as the breaker's probe.
    answered = {
        row.id: sum(1 for e in row.errors if e["ended"] == "circuit_open" and e.get("probe")) for row in rows
    }
    assert sum(answered.values()) >= JOBS * budget + 3, answered
    chosen = {row.id: row.probes for row in rows}  # the last turn of one of them succeeded
    turns = (answered, chosen)
    assert all(answered[job_id] <= chosen[job_id] <= answered[job_id] + 1 for job_id in chosen), turns
    # The probes go round the held jobs: no job is chosen more than its share (rounded up) plus one.
    assert max(chosen.values()) <= math.ceil(sum(chosen.values()) / JOBS) + 1, chosen
    # A probe's CircuitOpen is not counted: only those raised while the breaker was not asking (the
    # jobs already running when it opened) are, far fewer than the budget.
    for row in rows:
        counted = sum(1 for e in row.errors if e["ended"] == "circuit_open" and not e.get("probe"))
        assert row.snoozes == counted < budget, row.errors
    assert Circuit.objects.get(task_name=task.name).state == CircuitState.CLOSED


def test_snooze_with_a_time_budget_rides_out_an_outage_far_past_the_default_count(workers: Workers) -> None:
    task = recipe_jobs.snoozes_until_ready
    many = DEFAULT_SNOOZES + 5  # the count that killed every job before is no bound now: the time is
    partner(down=True)
    task.bulk_enqueue([((f"ready-{n}",), {}) for n in range(JOBS)])
    running = Running(workers, WORKERS, *WORKER_ARGS)
    jobs = Job.objects.filter(task_name=task.name)
    snoozed = f"{many} snoozes of each job"
    running.wait(lambda: not jobs.filter(snoozes__lt=many).exists() or died(), snoozed, timeout=90)
    assert not died(), running.stop()[-4000:]
    partner(down=False)
    running.wait(lambda: all_succeeded(task.name), "every job to succeed with the partner back", timeout=30)
    output = running.stop()

    assert DeadLetter.objects.count() == 0, output[-4000:]
    assert successes("ready-") == {f"ready-{n}": 1 for n in range(JOBS)}
    budget = task.policy.snooze_for
    assert budget is not None
    for row in jobs:
        assert row.snoozes >= many
        assert row.snoozed_seconds == pytest.approx(0.1 * row.snoozes)
        assert row.snoozed_seconds < budget.total_seconds()
