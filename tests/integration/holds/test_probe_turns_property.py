"""The probe of a breaker goes round its held jobs: over K openings no job is chosen more than ceil(K / N).

The property drives ``statements.CHOOSE_PROBE`` in PostgreSQL through random
outages: N held jobs, each opening's probe answering ``CircuitOpen`` (its
attempt given back) or failing (one attempt spent), and, as in a worker,
the last probe's ``run_at`` the earliest of the held jobs. The negative
control runs the same property with the choice before issue 36 (most
attempts left, then claim order), and hypothesis must find a job chosen
more than its share: the one that answers ``CircuitOpen`` every time.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobretry import RetryPolicy, job
from django_jobretry.holds import breakers
from django_jobretry.jobs import statements
from django_jobretry.models import Circuit, CircuitState, Job

pytestmark = pytest.mark.django_db

PROPERTY = settings(max_examples=40, deadline=None, database=None, report_multiple_bugs=False)
#: The choice before issue 36: a probe that got its attempt back was first again at every opening.
BY_ATTEMPTS_LEFT = statements.CHOOSE_PROBE.replace("ORDER BY probes, ", "ORDER BY ")
outcomes = st.lists(st.sampled_from(["circuit_open", "error"]), min_size=1, max_size=20)
held = st.integers(min_value=1, max_value=6)


@job(policy=RetryPolicy(max_attempts=30))
def partner_call(n: int) -> None:
    """Never run here: the property moves the rows as the worker's outcomes would."""


def outage(choose: str, count: int, answers: list[str]) -> Counter[int]:
    """How often each of ``count`` held jobs is chosen as the probe, one opening per answer."""
    task = partner_call.name
    Job.objects.filter(task_name=task).delete()
    Circuit.objects.filter(task_name=task).delete()
    for n in range(count):
        partner_call.enqueue(n)
    breakers.hold_task(task, timedelta(minutes=1), None, job_id=0)
    chosen: Counter[int] = Counter()
    last = 0  # no job yet: no job has id 0
    for answer in answers:
        jobs = Job.objects.filter(task_name=task)
        jobs.update(run_at=F("enqueued_at") - timedelta(minutes=1))  # all due, parked at the same end
        jobs.filter(pk=last).update(run_at=F("enqueued_at") - timedelta(hours=1))  # the last probe: first
        Circuit.objects.filter(task_name=task).update(state=CircuitState.OPEN, probe_job_id=None)
        with connection.cursor() as cursor:
            cursor.execute(choose, {"task": task})
            last = cursor.fetchone()[0]
        chosen[last] += 1
        if answer == "error":  # the probe failed: one attempt spent
            jobs.filter(pk=last).update(attempts=F("attempts") + 1)
    return chosen


@PROPERTY
@given(held, outcomes)
def test_no_job_is_chosen_more_than_its_share_of_the_openings(count: int, answers: list[str]) -> None:
    chosen = outage(statements.CHOOSE_PROBE, count, answers)
    assert sum(chosen.values()) == len(answers)
    assert max(chosen.values()) <= math.ceil(len(answers) / count), chosen


def test_negative_control_by_attempts_left_one_job_probes_again_and_again() -> None:
    @PROPERTY
    @given(held, outcomes)
    def by_attempts_left_holds(count: int, answers: list[str]) -> None:
        chosen = outage(BY_ATTEMPTS_LEFT, count, answers)
        assert max(chosen.values()) <= math.ceil(len(answers) / count), chosen

    with pytest.raises(AssertionError):
        by_attempts_left_holds()
