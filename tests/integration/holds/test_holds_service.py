"""Pauses, breakers and snoozes at the service level, on the real database and its clock.

Jobs run in this thread through ``django_jobretry.testing.run_jobs``, which
records outcomes with the worker's recorder, so failures are counted by
the same code a worker runs. Time passing is made by moving rows back
(``until``, ``open_until``, ``paused_at``), never by waiting.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from django_jobretry import CircuitOpen, FatalError, RetryPolicy, Snooze, job
from django_jobretry.holds import breakers, holds_report, pauses
from django_jobretry.jobs import claim
from django_jobretry.jobs.claimed import release
from django_jobretry.models import Circuit, CircuitState, DeadLetter, DeadReason, Job, JobStatus, Pause
from django_jobretry.testing import run_jobs
from tests.processes import db_now

pytestmark = pytest.mark.django_db

#: Fast retries, a breaker of three failures, a long window and cooldown (moved back by the tests).
OUTAGE = RetryPolicy(
    max_attempts=10,
    base_delay=0.001,
    max_delay=0.001,
    jitter=0,
    circuit={"failures": 3, "cooldown": 600, "max_cooldown": 3600},
)
DOWN = {"partner": True}


@job(policy=OUTAGE, queue_name="partner")
def call_partner(n: int) -> None:
    if DOWN["partner"]:
        raise ConnectionError(f"partner down ({n})")


@job(policy=OUTAGE)
def reject(n: int) -> None:
    raise FatalError(f"bad payload {n}")


@job(policy=RetryPolicy(max_attempts=3, max_snoozes=2))
def not_yet() -> None:
    raise Snooze(60)


@job(policy=RetryPolicy(max_attempts=2, max_snoozes=3))
def at_once() -> None:
    raise Snooze(0)


@job(policy=OUTAGE)
def rate_limited() -> None:
    raise CircuitOpen(for_=timedelta(minutes=5))


@job
def other() -> None:
    """Another task on the default queue: runs whatever the holds on the partner."""


@pytest.fixture(autouse=True)
def partner_down() -> None:
    DOWN["partner"] = True


def claim_ids() -> set[int]:
    claimed = claim.claim("test", 100, 60, None)
    release(claimed)
    return {job.id for job in claimed}


class TestPause:
    def test_a_paused_task_is_never_claimed_and_others_run(self) -> None:
        jobs = [call_partner.enqueue(n) for n in range(3)]
        other_job = other.enqueue()
        assert pauses.pause(task=call_partner.name, actor="alice", reason="partner down") is True
        run_jobs()
        assert Job.objects.get(pk=other_job.id).status == JobStatus.SUCCEEDED
        assert (
            list(Job.objects.filter(pk__in=[j.id for j in jobs]).values_list("attempts", flat=True))
            == [0] * 3
        )
        assert Job.objects.held().count() == 3
        DOWN["partner"] = False
        ended = pauses.resume(task=call_partner.name, actor="bob")
        assert ended is not None
        assert (ended.held, ended.paused_by) == (3, "alice")
        run_jobs()
        assert set(Job.objects.filter(task_name=call_partner.name).values_list("status", "attempts")) == {
            (JobStatus.SUCCEEDED, 1)
        }

    def test_a_paused_queue_holds_every_task_on_it(self) -> None:
        partner_job = call_partner.enqueue(1)
        other_job = other.enqueue()
        pauses.pause(queue="partner", actor="alice")
        assert claim_ids() == {other_job.id}
        pauses.resume(queue="partner", actor="alice")
        assert claim_ids() == {other_job.id, partner_job.id}

    def test_a_second_pause_changes_who_and_why_but_not_since(self) -> None:
        pauses.pause(queue="partner", actor="alice", reason="first")
        since = Pause.objects.get().paused_at
        assert pauses.pause(queue="partner", actor="bob", reason="second") is False
        row = Pause.objects.get()
        assert (row.paused_by, row.reason, row.paused_at) == ("bob", "second", since)

    def test_a_pause_ends_by_itself_at_until(self) -> None:
        partner_job = call_partner.enqueue(1)
        pauses.pause(queue="partner", actor="alice", until=timedelta(hours=1))
        assert claim_ids() == set()
        Pause.objects.update(until=db_now() - timedelta(seconds=1), paused_at=db_now() - timedelta(hours=1))
        assert claim_ids() == {partner_job.id}  # the claim ignores an expired pause at once
        assert [e.target.name for e in pauses.end_expired()] == ["partner"]
        assert not Pause.objects.exists()

    def test_resume_of_nothing_paused_says_so(self) -> None:
        assert pauses.resume(queue="partner", actor="alice") is None

    @pytest.mark.parametrize(
        ("kwargs", "words"),
        [
            ({}, "exactly one"),
            ({"queue": "a", "task": "b"}, "exactly one"),
            ({"queue": ""}, "queue ''"),
            ({"queue": "default", "until": datetime(2030, 1, 1)}, "no time zone"),
            ({"queue": "default", "until": timedelta(seconds=-1)}, "not in the future"),
            ({"queue": "default", "until": datetime(2000, 1, 1, tzinfo=UTC)}, "has passed"),
            ({"queue": "default", "until": datetime(9999, 12, 31, tzinfo=UTC)}, "until .* is out of range"),
            ({"queue": "default", "until": datetime.max.replace(tzinfo=UTC)}, "until .* is out of range"),
            ({"queue": "default", "until": timedelta.max}, "until .* is out of range"),
            ({"queue": "default", "until": timedelta(days=9_000 * 366)}, "until .* is out of range"),
            ({"queue": "default", "until": datetime(1, 1, 1, tzinfo=UTC)}, "until .* is out of range"),
            ({"queue": "default", "until": "2030-01-01"}, "until '2030-01-01' is not a datetime"),
            ({"queue": "default", "until": 3600}, "until 3600 is not a datetime or a timedelta"),
            ({"queue": "q\ud800"}, "is not a queue name"),
            ({"task": "t\udcff"}, "is not a task name"),
        ],
    )
    def test_bad_input_is_refused_and_nothing_stored(self, kwargs: dict[str, object], words: str) -> None:
        with pytest.raises(pauses.InvalidHold, match=words):
            pauses.pause(actor="alice", **kwargs)  # type: ignore[arg-type]
        assert not Pause.objects.exists()

    def test_a_misspelt_task_is_refused_with_the_close_name(self) -> None:
        typo = call_partner.name[:-2] + call_partner.name[-1]  # "...call_partnr"
        with pytest.raises(pauses.UnknownName) as refused:
            pauses.pause(task=typo, actor="alice")
        assert str(refused.value) == (
            f"task {typo!r} is not declared and no job has it, so its pause would hold nothing. "
            f"Did you mean {call_partner.name!r}? To pause it before it is deployed, pass undeployed=True."
        )
        assert isinstance(refused.value, pauses.InvalidHold)
        assert not Pause.objects.exists()

    def test_a_misspelt_queue_is_refused_and_a_task_name_is_told_apart(self) -> None:
        with pytest.raises(pauses.UnknownName, match=r"queue 'partnr' .* Did you mean 'partner'"):
            pauses.pause(queue="partnr", actor="alice")
        with pytest.raises(pauses.UnknownName, match="It is a task's name: pause the task instead"):
            pauses.pause(queue=call_partner.name, actor="alice")
        assert not Pause.objects.exists()

    def test_undeployed_pauses_a_name_nothing_knows_yet_and_holds_its_first_job(self) -> None:
        assert pauses.pause(task="billing.sync_invoices", actor="alice", undeployed=True) is True
        assert Pause.objects.get().task_name == "billing.sync_invoices"
        coming = other.enqueue()
        Job.objects.filter(pk=coming.id).update(task_name="billing.sync_invoices")
        assert claim_ids() == set()

    def test_a_name_known_from_a_job_or_the_settings_is_paused(self, settings: object) -> None:
        stray = other.enqueue()
        Job.objects.filter(pk=stray.id).update(task_name="retired.task", queue_name="legacy")
        assert pauses.pause(task="retired.task", actor="alice") is True
        assert pauses.pause(queue="legacy", actor="alice") is True
        settings.TASKS = {  # type: ignore[attr-defined]
            "default": {"BACKEND": "django_jobretry.backends.JobRetryBackend", "QUEUES": ["default", "bulk"]}
        }
        assert pauses.pause(queue="bulk", actor="alice") is True
        assert pauses.pause(queue="default", actor="alice") is True

    def test_held_time_is_left_out_of_retry_for(self) -> None:
        partner_job = call_partner.enqueue(1)
        run_jobs()  # one failed attempt: first_attempt_at is set, the retry is due at once
        pauses.pause(task=call_partner.name, actor="alice")
        hour_ago = db_now() - timedelta(hours=1)
        Pause.objects.update(paused_at=hour_ago)
        Job.objects.filter(pk=partner_job.id).update(run_at=hour_ago, first_attempt_at=hour_ago)
        pauses.resume(task=call_partner.name, actor="alice")
        held_seconds = Job.objects.get(pk=partner_job.id).held_seconds
        assert 3600 <= held_seconds < 3600 + 60


class TestBreaker:
    def trip(self) -> list[int]:
        ids = [call_partner.enqueue(n).id for n in range(6)]
        run_jobs(max_runs=3)
        return ids

    def test_retryable_failures_open_it_and_hold_the_task(self) -> None:
        self.trip()
        row = Circuit.objects.get(task_name=call_partner.name)
        assert (row.state, row.opens, row.failures) == (CircuitState.OPEN, 1, 0)
        assert claim_ids() == set()
        assert Job.objects.filter(task_name=call_partner.name, attempts__gt=0).count() == 3
        report = holds_report()
        assert [(line.task_name, line.held) for line in report.circuits] == [(call_partner.name, 6)]

    def test_fatal_failures_never_count(self) -> None:
        for n in range(5):
            reject.enqueue(n)
        run_jobs()
        assert DeadLetter.objects.filter(reason=DeadReason.FATAL).count() == 5
        assert not Circuit.objects.filter(task_name=reject.name).exclude(state=CircuitState.CLOSED).exists()

    def test_after_the_cooldown_one_probe_runs_and_its_success_releases_the_rest(self) -> None:
        ids = self.trip()
        Circuit.objects.update(open_until=db_now() - timedelta(seconds=1))
        breakers.beat()
        row = Circuit.objects.get()
        assert row.state == CircuitState.HALF_OPEN
        assert claim_ids() == {row.probe_job_id}
        DOWN["partner"] = False
        run_jobs()  # only the probe is due to this claim
        assert row.probe_job_id is not None
        assert Job.objects.get(pk=row.probe_job_id).status == JobStatus.SUCCEEDED
        breakers.beat()
        assert Circuit.objects.get().state == CircuitState.CLOSED
        run_jobs(include_scheduled=True)  # released 0.1 s apart
        assert set(Job.objects.filter(pk__in=ids).values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
        assert not DeadLetter.objects.exists()

    def test_a_failed_probe_reopens_with_twice_the_cooldown(self) -> None:
        self.trip()
        Circuit.objects.update(open_until=db_now() - timedelta(seconds=1))
        breakers.beat()
        probe = Circuit.objects.get().probe_job_id
        assert probe is not None
        run_jobs(max_runs=1)
        assert Job.objects.get(pk=probe).attempts >= 1
        breakers.beat()
        row = Circuit.objects.get()
        assert (row.state, row.opens, row.cooldown_seconds) == (CircuitState.OPEN, 2, 1200)
        assert row.open_until > db_now() + timedelta(seconds=1100)

    def test_a_failed_probe_is_not_claimed_again_before_the_breaker_judges_it(self) -> None:
        """Its retry is due at once (1 ms backoff), but it is held until a heartbeat reopens the breaker.

        Before, a probe let through by id ran its retries too: a heartbeat
        late under load cost an attempt per retry while the partner was down.
        """
        self.trip()
        Circuit.objects.update(open_until=db_now() - timedelta(seconds=1))
        breakers.beat()
        chosen = Circuit.objects.get()
        probe, before = chosen.probe_job_id, chosen.probe_attempts
        assert probe is not None
        assert before is not None
        assert claim_ids() == {probe}
        run_jobs(max_runs=1)
        failed = Job.objects.get(pk=probe)
        assert (failed.status, failed.attempts) == (JobStatus.READY, before + 1)
        Job.objects.filter(pk=probe).update(run_at=db_now() - timedelta(seconds=1))
        assert Circuit.objects.get().state == CircuitState.HALF_OPEN  # no heartbeat yet
        assert claim_ids() == set()
        run_jobs(max_runs=3)
        assert Job.objects.get(pk=probe).attempts == before + 1

    def test_each_opening_probes_with_the_job_that_has_the_most_attempts_left(self) -> None:
        """A long outage spreads its probes: a failed probe is not chosen while others have more left."""
        self.trip()
        probes: list[int] = []
        for _ in range(3):
            Circuit.objects.update(open_until=db_now() - timedelta(seconds=1))
            Job.objects.filter(task_name=call_partner.name).update(run_at=db_now() - timedelta(seconds=1))
            breakers.beat()
            probe = Circuit.objects.get().probe_job_id
            assert probe is not None
            probes.append(probe)
            run_jobs(max_runs=1)
            breakers.beat()  # the probe failed: open again
            assert Circuit.objects.get().state == CircuitState.OPEN
        assert len(set(probes)) == 3, probes
        left = [job.max_attempts - job.attempts for job in Job.objects.filter(pk__in=probes)]
        assert min(left) >= OUTAGE.max_attempts - 2, left

    def test_with_nothing_due_to_probe_it_closes(self) -> None:
        self.trip()
        Job.objects.filter(task_name=call_partner.name).update(run_at=db_now() + timedelta(days=1))
        Circuit.objects.update(open_until=db_now() - timedelta(seconds=1))
        breakers.beat()
        assert Circuit.objects.get().state == CircuitState.CLOSED

    def test_an_operator_closes_it_by_hand(self) -> None:
        self.trip()
        assert breakers.close(call_partner.name, actor="alice") is True
        assert Circuit.objects.get().state == CircuitState.CLOSED
        assert breakers.close(call_partner.name, actor="alice") is False


class TestSnooze:
    def test_a_snooze_gives_the_attempt_back_until_the_budget_is_spent(self) -> None:
        snoozer = not_yet.enqueue()
        for expected in (1, 2):
            run_jobs()
            row = Job.objects.get(pk=snoozer.id)
            assert (row.attempts, row.snoozes, row.status) == (0, expected, JobStatus.READY)
            assert [entry["ended"] for entry in row.errors] == ["snoozed"] * expected
            assert row.run_at > db_now() + timedelta(seconds=50)
            Job.objects.filter(pk=snoozer.id).update(run_at=db_now())
        run_jobs()
        dead = DeadLetter.objects.get(job_id=snoozer.id)
        assert dead.reason == DeadReason.SNOOZE_BUDGET

    def test_a_snooze_of_zero_is_a_snooze_and_dies_for_its_budget_not_its_attempts(self) -> None:
        snoozer = at_once.enqueue()
        for expected in (1, 2, 3):
            run_jobs()
            row = Job.objects.get(pk=snoozer.id)
            assert (row.attempts, row.snoozes, row.status) == (0, expected, JobStatus.READY)
            assert row.errors[-1]["ended"] == "snoozed"
            assert row.errors[-1]["delay"] == 0
        run_jobs()
        assert DeadLetter.objects.get(job_id=snoozer.id).reason == DeadReason.SNOOZE_BUDGET

    def test_circuit_open_holds_the_whole_task(self) -> None:
        first, second = rate_limited.enqueue(), rate_limited.enqueue()
        run_jobs(max_runs=1)
        row = Circuit.objects.get(task_name=rate_limited.name)
        assert row.state == CircuitState.OPEN
        assert f"job {first.id} raised CircuitOpen" in row.reason
        assert row.open_until > db_now() + timedelta(minutes=4)
        assert Job.objects.get(pk=first.id).attempts == 0
        assert claim_ids() == set()
        assert Job.objects.get(pk=second.id).attempts == 0


def test_enqueue_is_not_refused_while_held() -> None:
    pauses.pause(task=call_partner.name, actor="alice")
    call_partner.enqueue(1)
    assert Job.objects.held().count() == 1


def test_run_jobs_does_not_bring_held_jobs_forward() -> None:
    later = call_partner.using(run_after=timedelta(hours=1)).enqueue(1)
    pauses.pause(task=call_partner.name, actor="alice")
    run_jobs(include_scheduled=True)
    assert Job.objects.get(pk=later.id).run_at > db_now() + timedelta(minutes=50)


def test_an_open_breaker_parks_its_jobs_at_its_end_and_still_counts_them_held() -> None:
    TestBreaker().trip()
    other_job = other.enqueue()
    breakers.beat()
    row = Circuit.objects.get()
    assert row.open_until is not None
    parked = Job.objects.filter(task_name=call_partner.name)
    assert set(parked.values_list("run_at", flat=True)) == {row.open_until}
    assert all(job.held_seconds > 500 for job in parked if job.first_attempt_at is not None)
    assert Job.objects.held().count() == 6
    assert holds_report().circuits[0].held == 6
    assert claim_ids() == {other_job.id}
