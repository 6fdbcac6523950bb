"""docs/outages.md's recipes through a long outage, at the service level, on the real database and its clock.

Jobs run in this thread through ``django_jobretry.testing.run_jobs`` and
the breakers move on with ``breakers.beat()``, as a worker's heartbeat
moves them. Time passes by moving every time of the task back together
(:func:`cooldown_over`), so the order of the rows is the one a worker sees.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import F

from django_jobretry import CircuitOpen, RetryPolicy, Snooze, job
from django_jobretry.holds import breakers
from django_jobretry.models import Circuit, CircuitState, DeadLetter, DeadReason, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.processes import db_now

pytestmark = pytest.mark.django_db

DOWN = {"partner": True}
#: Retry-After of the partner's 503, in seconds.
RETRY_AFTER = 60


@job(policy=RetryPolicy(max_attempts=3, max_snoozes=3))
def answers_503(n: int) -> None:
    """The docs' 503 pattern: hold the whole task for the partner's Retry-After."""
    if DOWN["partner"]:
        raise CircuitOpen(for_=RETRY_AFTER)


@job(policy=RetryPolicy(max_attempts=2, max_snoozes=2))
def counted_snoozer() -> None:
    raise Snooze(60)


@job(policy=RetryPolicy(max_attempts=2, snooze_for=150))
def timed_snoozer() -> None:
    raise Snooze(60, "the file is not uploaded yet")


@job(policy=RetryPolicy(max_attempts=2, snooze_for=timedelta(hours=6)))
def snoozes_through_the_outage() -> None:
    if DOWN["partner"]:
        raise Snooze(5)


@pytest.fixture(autouse=True)
def partner_down() -> None:
    DOWN["partner"] = True


def cooldown_over(task: str) -> None:
    """The breaker's end has passed: its times and its jobs' ``run_at`` moved back by the same amount."""
    row = Circuit.objects.get(task_name=task)
    assert row.open_until is not None
    shift = row.open_until - db_now() + timedelta(milliseconds=1)
    Job.objects.filter(task_name=task).update(run_at=F("run_at") - shift)
    Circuit.objects.filter(task_name=task).update(
        open_until=F("open_until") - shift, opened_at=F("opened_at") - shift
    )


def probe_entries(job_id: int) -> int:
    """How often the job ran as its breaker's probe and answered CircuitOpen, read from its history."""
    errors = Job.objects.get(pk=job_id).errors
    return sum(1 for entry in errors if entry["ended"] == "circuit_open" and entry.get("probe"))


class TestCircuitOpenThroughALongOutage:
    OPENINGS = 4 * answers_503.policy.max_snoozes

    def test_the_probes_go_round_the_held_jobs_and_none_dies(self) -> None:
        """12 openings of 3 jobs whose budget is 3 snoozes: before, job 1 was the probe each time and died."""
        ids = [answers_503.enqueue(n).id for n in range(3)]
        run_jobs(max_runs=1)  # the first job opens the breaker
        chosen: list[int] = []
        for opening in range(self.OPENINGS):
            assert not DeadLetter.objects.exists(), f"a job died before opening {opening + 2}: {chosen}"
            breakers.beat()  # parks the held jobs at the breaker's end
            cooldown_over(answers_503.name)
            breakers.beat()
            row = Circuit.objects.get(task_name=answers_503.name)
            assert row.state == CircuitState.HALF_OPEN
            assert row.probe_job_id is not None
            chosen.append(row.probe_job_id)
            assert len(run_jobs(max_runs=1).runs) == 1  # the probe answers 503 again: open again
        assert not DeadLetter.objects.exists()
        turns = Counter(chosen)
        assert set(turns) == set(ids)
        assert max(turns.values()) <= math.ceil(self.OPENINGS / len(ids)), turns
        assert {job_id: probe_entries(job_id) for job_id in ids} == dict(turns)
        assert {row.id: row.probes for row in Job.objects.filter(pk__in=ids)} == dict(turns)
        # A probe's CircuitOpen is the breaker's answer, not the job's: only the first one counted.
        assert sorted(Job.objects.filter(pk__in=ids).values_list("snoozes", flat=True)) == [0, 0, 1]

        DOWN["partner"] = False
        breakers.beat()
        cooldown_over(answers_503.name)
        breakers.beat()
        run_jobs(max_runs=1)  # the probe succeeds
        breakers.beat()  # closes, releasing the rest
        run_jobs(include_scheduled=True)
        assert set(Job.objects.filter(pk__in=ids).values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
        assert Circuit.objects.get(task_name=answers_503.name).state == CircuitState.CLOSED


class TestSnoozeBudget:
    def snooze_until_dead(self, task_name: str) -> DeadLetter:
        for _ in range(10):
            run_jobs()
            dead = DeadLetter.objects.filter(task_name=task_name).first()
            if dead is not None:
                return dead
            Job.objects.filter(task_name=task_name).update(run_at=db_now())
        raise AssertionError(f"{task_name} never spent its snooze budget")

    def test_past_max_snoozes_the_dead_letter_says_how_many_over_how_long_and_which_limit(self) -> None:
        counted_snoozer.enqueue()
        dead = self.snooze_until_dead(counted_snoozer.name)
        assert dead.reason == DeadReason.SNOOZE_BUDGET
        assert dead.last_error == (
            "snoozed 2 times (2m00s in all): the most its policy allows (max_snoozes 2)"
        )
        assert dead.errors[-1]["rule"] == f"max_snoozes (2) of policy {dead.policy_name!r}"

    def test_past_snooze_for_the_dead_letter_names_the_time_budget(self) -> None:
        timed_snoozer.enqueue()
        dead = self.snooze_until_dead(timed_snoozer.name)
        assert dead.reason == DeadReason.SNOOZE_BUDGET
        assert dead.last_error == (
            "snoozed 2 times (2m00s in all): another 1m00s is past its policy's snooze_for (2m30s); "
            "its Snooze said: the file is not uploaded yet"
        )
        assert dead.errors[-1]["rule"] == f"snooze_for (2m30s) of policy {dead.policy_name!r}"

    def test_a_time_budget_outlasts_the_default_count(self) -> None:
        """Snooze(5 s) every run, 30 times: 2m30s of snoozes, far past 20 snoozes, far within 6 hours."""
        snoozer = snoozes_through_the_outage.enqueue()
        for snoozes in range(1, 31):
            run_jobs()
            row = Job.objects.get(pk=snoozer.id)
            assert (row.status, row.snoozes, row.snoozed_seconds) == (JobStatus.READY, snoozes, 5 * snoozes)
            Job.objects.filter(pk=snoozer.id).update(run_at=db_now())
        DOWN["partner"] = False
        run_jobs()
        assert Job.objects.get(pk=snoozer.id).status == JobStatus.SUCCEEDED
        assert not DeadLetter.objects.exists()
