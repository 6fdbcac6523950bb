"""Closing a breaker by hand (admin, ``resume --circuit``, ``breakers.close``) releases every job it holds.

Before, only the jobs due at that moment were released: those parked at
the breaker's end and the job that raised ``CircuitOpen`` stayed where they
were, up to an hour away, although the command said they were released.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from django_jobretry import CircuitOpen, RetryPolicy, job
from django_jobretry.holds import breakers
from django_jobretry.models import Circuit, CircuitState, DeadLetter, Job, JobStatus
from django_jobretry.testing import run_jobs
from tests.processes import db_now

pytestmark = pytest.mark.django_db

DOWN = {"partner": True}


@job(policy=RetryPolicy(max_attempts=3, circuit={"failures": 100, "release_per_second": 4}))
def answers_503_for_an_hour(n: int) -> None:
    if DOWN["partner"]:
        raise CircuitOpen(for_=timedelta(hours=1))


@pytest.fixture(autouse=True)
def partner_down() -> None:
    DOWN["partner"] = True


class TestClosingByHand:
    def hold_for_an_hour(self) -> list[int]:
        ids = [answers_503_for_an_hour.enqueue(n).id for n in range(4)]
        run_jobs(max_runs=1)  # job 1 answers CircuitOpen for an hour
        attempted = ids[3]
        Job.objects.filter(pk=attempted).update(first_attempt_at=db_now() - timedelta(minutes=1))
        breakers.beat()  # the three others are parked at the breaker's end
        soon = db_now() + timedelta(minutes=50)
        assert Job.objects.filter(pk__in=ids, run_at__gt=soon).count() == 4
        return ids

    def assert_released_now(self, ids: list[int]) -> None:
        """Each job due now or a quarter of a second after the one before (4 a second), in claim order."""
        now = db_now()
        rows = Job.objects.filter(pk__in=ids).order_by("run_at")
        released = [row.run_at for row in rows]
        assert released[0] <= now
        gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(released)]
        assert gaps == pytest.approx([0.25] * 3, abs=0.01)
        assert [row.id for row in rows] == sorted(ids)
        # Held until now, not until the breaker's end: held_seconds counts what was really held.
        assert all(row.held_seconds < 120 for row in rows)
        DOWN["partner"] = False
        run_jobs(include_scheduled=True)
        assert set(rows.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
        assert not DeadLetter.objects.exists()

    def test_close_releases_the_job_that_raised_circuit_open_and_those_parked(self) -> None:
        ids = self.hold_for_an_hour()
        assert breakers.close(answers_503_for_an_hour.name, actor="alice") is True
        assert Circuit.objects.get(task_name=answers_503_for_an_hour.name).state == CircuitState.CLOSED
        self.assert_released_now(ids)

    def test_resume_circuit_says_how_many_it_released_and_they_run(self) -> None:
        ids = self.hold_for_an_hour()
        out = StringIO()
        call_command("resume", "--circuit", answers_503_for_an_hour.name, "--actor", "alice", stdout=out)
        name = answers_503_for_an_hour.name
        said = f"circuit of task {name} closed by alice; 4 held job(s) released, 4 a second\n"
        assert out.getvalue() == said
        self.assert_released_now(ids)
