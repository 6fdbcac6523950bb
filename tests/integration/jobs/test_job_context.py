"""``current_job().is_last_attempt`` as a handler sees it, run by the real worker engine in this process.

A handler uses it to behave differently when no retry follows (fall back,
alert, keep partial work). It must be true on exactly one attempt: the one
the job's own limit makes last, which is the limit frozen on the job row,
not the policy's (an operator may have raised it).
"""

from __future__ import annotations

import pytest

from django_jobretry import RetryableError, RetryPolicy, current_job, job
from django_jobretry.models import Job, JobStatus
from tests.inprocess import run_until_settled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("keep_signal_handlers")]

#: (attempt, max_attempts, is_last_attempt) of each run of the probe, in order.
SEEN: list[tuple[int, int, bool]] = []


@job(
    name="tests.job_context.last_attempt_fallback",
    policy=RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.001, jitter=0),
)
def last_attempt_fallback() -> None:
    """Fails until its last attempt, which takes the fallback and succeeds."""
    context = current_job()
    assert context is not None
    SEEN.append((context.attempt, context.max_attempts, context.is_last_attempt))
    if not context.is_last_attempt:
        raise RetryableError("the primary path is down")


def test_only_the_last_attempt_is_the_last_and_it_can_take_a_fallback() -> None:
    SEEN.clear()
    queued = last_attempt_fallback.enqueue()
    run_until_settled()
    assert SEEN == [(1, 3, False), (2, 3, False), (3, 3, True)]
    done = Job.objects.get(pk=queued.pk)
    assert (done.status, done.attempts) == (JobStatus.SUCCEEDED, 3)


def test_the_limit_frozen_on_the_job_decides_not_the_policy() -> None:
    SEEN.clear()
    queued = last_attempt_fallback.enqueue()
    Job.objects.filter(pk=queued.pk).update(max_attempts=5)  # as an operator raising the limit would
    run_until_settled()
    assert SEEN == [(1, 5, False), (2, 5, False), (3, 5, False), (4, 5, False), (5, 5, True)]
    assert Job.objects.get(pk=queued.pk).status == JobStatus.SUCCEEDED
