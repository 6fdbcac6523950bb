"""The job store as a state machine: the real services against a pure model.

Hypothesis drives enqueue (some with a unique_key), claim, cancel (a ready job dies
"cancelled" at once; a running one gets a request, which a retry or lease recovery of
that attempt honours: it dies "cancelled" too), success, retryable and fatal
failures (through the worker's own Recorder), stale completions, time passing, lease
recovery, requeue and discard of dead letters (including ones already handled, and
requeues the unique_key refuses) and pruning, against PostgreSQL and against the pure
model in tests/job_model.py, and compares the two after every step.

Everything goes through the services. The only raw writes simulate time
passing: every policy below backs off for an hour, so a retry is due only
when ``make_retries_due`` moves its run_at to now, and a lease runs out only
when ``expire_lease`` moves it into the past. The model can then predict
every claim exactly (ids, order, attempt numbers). One task has a requeue
budget of 1, so the Recorder's automatic requeue runs too. A held attempt
whose lease ran out but is not yet recovered may still complete (the fence
is id, running, attempt and token, docs/design.md#rule-3); once recovered or
finished, completing it again is stale and must leave both tables as they were.

Checked after every step (``agrees_with_model`` and ``holds_invariants``):
every job ever created is in exactly one place - a ready, running or
succeeded row, a dead letter, or accounted for by the model as pruned,
discarded or requeued (the requeue's new job carrying the provenance);
each row's status, attempts, history of ended attempts (one entry per
unsuccessful attempt, bounded by ERROR_HISTORY_LIMIT) and requeue provenance
agree with the model; attempts never exceed max_attempts; a running job, and
only a running job, has a lease; at most one live job per unique_key; and the
attempts the machine still holds are exactly the rows' current leases.

The test runs in pytest-django's one transaction; each hypothesis example
works inside its own savepoint, rolled back in ``teardown``, so examples
(and shrinking) never see each other's rows, even after a failed statement.
The negative controls (test_state_machine_controls.py) run the same machine
against deliberately broken transitions; each must fail on its check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_jobretry import FatalError, RetryableError, RetryPolicy, deadletters, job
from django_jobretry.decorators import JobDefinition
from django_jobretry.exceptions import NotDead, RequeueConflict
from django_jobretry.jobs import claim, claimed, recovery, retention
from django_jobretry.jobs.claimed import ClaimedJob
from django_jobretry.jobs.recovery import cancel_jobs
from django_jobretry.models import DeadLetter, Job, JobStatus
from django_jobretry.registry import resolve_policy
from tests.attempts import record_failure
from tests.job_model import FATAL, LIVE, READY, RETRY_NOW, RETRYABLE, RUNNING, SUCCEEDED, Kind, Model

pytestmark = pytest.mark.django_db

OWNER, OPERATOR = "state-machine-worker", "state-machine-operator"
LEASE = 300  # seconds; a lease runs out only when expire_lease says so
HISTORY_LIMIT = 2  # ERROR_HISTORY_LIMIT for this test: below max_attempts, so trimming is exercised
HOUR = 3600
MAX_LIVE = 4  # live jobs at most: a small store is worked through to its dead letters and requeues


def _policy(max_attempts: int, requeue_budget: int = 0, retry_for: timedelta | None = None) -> RetryPolicy:
    """``retry_for`` (never reached here) sends failures through the locking write."""
    return RetryPolicy(
        max_attempts=max_attempts,
        base_delay=HOUR,
        max_delay=HOUR,
        jitter=0,
        requeue_budget=requeue_budget,
        retry_for=retry_for,
    )


@job(name="tests.state_machine.once", queue_name="sm-other", policy=_policy(1, requeue_budget=1))
def once() -> None:
    """Never run: the machine records each attempt's outcome itself."""


@job(name="tests.state_machine.twice", policy=_policy(2))
def twice() -> None:
    """Never run."""


@job(name="tests.state_machine.thrice", policy=_policy(3, retry_for=timedelta(days=1)))
def thrice() -> None:
    """Never run."""


DEFINITIONS: dict[Kind, JobDefinition[[]]] = {
    Kind(
        d.name,
        d.queue_name,
        resolve_policy(d.policy)[1].max_attempts,
        resolve_policy(d.policy)[1].requeue_budget,
    ): d
    for d in (once, twice, thrice)
}
ERRORS: dict[str, Callable[[], BaseException]] = {
    RETRYABLE: lambda: ConnectionResetError("upstream reset"),
    RETRY_NOW: lambda: RetryableError("try again at once", delay=0),
    FATAL: lambda: FatalError("payload is invalid"),
}

JOB_FIELDS = (
    "id",
    "task_name",
    "status",
    "attempts",
    "max_attempts",
    "priority",
    "unique_key",
    "errors",
    "requeue_count",
    "requeue_history",
    "lease_owner",
    "lease_token",
    "lease_expires_at",
    "first_attempt_at",
    "finished_at",
)
DEAD_FIELDS = (
    "id",
    "job_id",
    "task_name",
    "queue_name",
    "reason",
    "attempts",
    "max_attempts",
    "unique_key",
    "errors",
    "requeue_count",
    "requeue_history",
    "last_error",
)


def history(entries: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["attempt"], e["ended"]) for e in entries]


def provenance(entries: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    return [(e["dead_letter_id"], e["job_id"], e["reason"]) for e in entries]


def snapshot() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every column of both tables: what a stale completion must leave exactly as it was."""
    return (
        list(Job.objects.order_by("pk").values_list()),
        list(DeadLetter.objects.order_by("pk").values_list()),
    )


def raises(error: type[Exception], call: Callable[[], object]) -> bool:
    try:
        call()
    except error:
        return True
    return False


class JobStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        savepoint = connection.savepoint()  # not transaction.savepoint(): deprecated in Django 6.1
        assert savepoint is not None, "the machine runs inside the test's transaction (django_db)"
        self.savepoint = savepoint
        self.model = Model(HISTORY_LIMIT)
        #: Attempts our "workers" are running, by job id: the current lease of each running row.
        self.held: dict[int, ClaimedJob] = {}
        #: Attempts that ended or lost their lease: completing them again must change nothing.
        self.stale: list[ClaimedJob] = []

    def teardown(self) -> None:
        connection.savepoint_rollback(self.savepoint)

    @initialize()
    def empty_tables(self) -> None:
        Job.objects.all().delete()
        DeadLetter.objects.all().delete()

    # -- enqueue and claim -----------------------------------------------------------------------

    @precondition(lambda self: sum(j.status in LIVE for j in self.model.jobs.values()) < MAX_LIVE)
    @rule(
        kind=st.sampled_from(list(DEFINITIONS)),
        priority=st.sampled_from([0, 0, 5]),
        key=st.sampled_from([None, None, "k1", "k2"]),
    )
    def enqueue(self, kind: Kind, priority: int, key: str | None) -> None:
        holder = self.model.live_holder(key)
        row = DEFINITIONS[kind].using(priority=priority, unique_key=key).enqueue()
        if holder is not None:
            assert row.pk == holder, f"unique_key {key!r} is held by job {holder}, enqueue gave {row.pk}"
        else:
            self.model.enqueued(row.pk, kind, priority, key)

    @precondition(lambda self: any(j.status == READY for j in self.model.jobs.values()))
    @rule(limit=st.integers(1, 3))
    def claim(self, limit: int) -> None:
        expected = [
            (j.id, j.attempts + 1, j.original_id, len(j.requeues)) for j in self.model.claimable(limit)
        ]
        claimed = claim.claim(OWNER, limit, LEASE, None)
        got = [(c.id, c.attempt, c.original_job_id, c.requeue_count) for c in claimed]
        assert got == expected, f"claim: got (id, attempt, original, requeues) {got}, model {expected}"
        self.model.claim(limit)
        self.held.update((c.id, c) for c in claimed)

    # -- outcomes of held attempts ---------------------------------------------------------------

    def _take_held(self, data: st.DataObject) -> ClaimedJob:
        attempt = self.held.pop(data.draw(st.sampled_from(sorted(self.held)), label="job id"))
        self.stale.append(attempt)
        return attempt

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def succeed(self, data: st.DataObject) -> None:
        attempt = self._take_held(data)
        assert claimed.succeed([attempt]) == {attempt.id}, "a held lease failed to record success"
        self.model.succeed(attempt.id)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), how=st.sampled_from([RETRYABLE, RETRY_NOW, FATAL]))
    def fail(self, data: st.DataObject, how: str) -> None:
        attempt = self._take_held(data)
        record_failure(attempt, ERRORS[how](), owner=OWNER)
        reason = self.model.fail(attempt.id, how)
        if reason is None:
            return
        if not self.model.auto_requeues(attempt.id, reason):
            self.model.bury(attempt.id, DeadLetter.objects.get(job_id=attempt.id).pk, reason)
            return
        # The policy's requeue budget revived the dead letter at once, as a new job.
        [(new_id, requeues)] = Job.objects.exclude(pk__in=list(self.model.jobs)).values_list(
            "pk", "requeue_history"
        )
        dead_id = requeues[-1]["dead_letter_id"]
        self.model.bury(attempt.id, dead_id, reason)
        self.model.requeued(dead_id, new_id, due_now=False)

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data(), how=st.sampled_from(["success", RETRYABLE, FATAL]))
    def stale_completion(self, data: st.DataObject, how: str) -> None:
        # Half the draws favour the telling case: an older attempt of a job that is running again.
        stale = st.sampled_from(self.stale)
        reclaimed = [a for a in self.stale if a.id in self.held]
        attempt = data.draw(st.sampled_from(reclaimed) | stale if reclaimed else stale, label="stale attempt")
        before = snapshot()
        try:
            if how == "success":
                assert claimed.succeed([attempt]) == set(), "a stale success was recorded"
            else:
                record_failure(attempt, ERRORS[how](), owner=OWNER)
        except DatabaseError as exc:  # e.g. a constraint refusing what the stale write tried
            raise AssertionError(f"a stale {how} reached the database: {exc}") from exc
        assert snapshot() == before, f"a stale {how} changed the tables"

    # -- time passing and lease recovery ---------------------------------------------------------

    @precondition(lambda self: any(j.status == READY and j.due is None for j in self.model.jobs.values()))
    @rule()
    def make_retries_due(self) -> None:
        moved = Job.objects.filter(status=JobStatus.READY, run_at__gt=Now()).update(run_at=Now())
        assert moved == self.model.make_due(), "a different set of jobs was waiting for its backoff"

    @precondition(lambda self: any(not self.model.jobs[i].lease_expired for i in self.held))
    @rule(data=st.data())
    def expire_lease(self, data: st.DataObject) -> None:
        live = sorted(i for i in self.held if not self.model.jobs[i].lease_expired)
        job_id = data.draw(st.sampled_from(live), label="job id")
        past = Now() - Value(timedelta(seconds=1), output_field=DurationField())
        assert Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(lease_expires_at=past) == 1
        self.model.jobs[job_id].lease_expired = True

    @precondition(lambda self: bool(self.held))
    @rule()
    def recover(self) -> None:
        expected = {
            j.id: (j.attempts, j.attempts >= j.kind.max_attempts or j.cancel_requested)
            for j in self.model.expired()
        }
        recovered = recovery.recover_expired(100, HISTORY_LIMIT)
        assert {r.id: (r.attempt, r.buried) for r in recovered} == expected, "recovery"
        for item in recovered:
            self.stale.append(self.held.pop(item.id))
            reason = self.model.recovered(item.id)
            if reason is not None:
                assert item.dead_letter_id is not None
                assert item.reason == reason
                self.model.bury(item.id, item.dead_letter_id, reason)

    @precondition(lambda self: bool(self.model.jobs))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.model.jobs)), label="job to cancel")
        expected = self.model.cancel(job_id)
        result = cancel_jobs([job_id], actor=OPERATOR)
        if expected == "buried":
            assert list(result.dead_letters) == [job_id], f"cancel of ready job {job_id}: {result}"
            self.model.bury(job_id, result.dead_letters[job_id], "cancelled")
        elif expected == "stopping":
            assert result.stopping == [job_id], f"cancel of running job {job_id}: {result}"
        else:
            assert result.not_live == [job_id], f"cancel of finished job {job_id}: {result}"

    # -- dead letters ----------------------------------------------------------------------------

    def _dead_letter_id(self, data: st.DataObject) -> int:
        known = sorted(self.model.dead.keys() | self.model.handled)
        return data.draw(st.sampled_from(known), label="dead letter id")

    @precondition(lambda self: bool(self.model.dead or self.model.handled))
    @rule(data=st.data(), later=st.booleans())
    def requeue(self, data: st.DataObject, later: bool) -> None:
        dead_id = self._dead_letter_id(data)
        run_after = timedelta(hours=1) if later else None
        refusal = self.model.requeue_refusal(dead_id)

        def call() -> Job:
            job = deadletters.requeue(dead_id, run_after=run_after, actor=OPERATOR)
            assert isinstance(job, Job)  # only this package's own dead letters here
            return job

        if refusal == "not_dead":
            assert raises(NotDead, call), f"requeue of handled dead letter {dead_id} did not raise NotDead"
        elif refusal == "conflict":
            assert raises(RequeueConflict, call), f"requeue of {dead_id} did not raise RequeueConflict"
        else:
            self.model.requeued(dead_id, call().pk, due_now=not later)

    @precondition(lambda self: bool(self.model.dead or self.model.handled))
    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        dead_id = self._dead_letter_id(data)
        if dead_id not in self.model.dead:
            assert raises(NotDead, lambda: deadletters.discard(dead_id, actor=OPERATOR)), "discard"
            return
        deadletters.discard(dead_id, actor=OPERATOR)
        self.model.discard(dead_id)

    # -- retention -------------------------------------------------------------------------------

    @precondition(lambda self: any(j.status == SUCCEEDED for j in self.model.jobs.values()))
    @rule(everything=st.booleans())
    def prune_succeeded(self, everything: bool) -> None:
        older_than = timedelta(0) if everything else timedelta(hours=1)
        assert retention.prune_succeeded(older_than) == self.model.prune_succeeded(everything)

    @precondition(lambda self: bool(self.model.dead))
    @rule(everything=st.booleans())
    def prune_dead_letters(self, everything: bool) -> None:
        older_than = timedelta(0) if everything else timedelta(hours=1)
        assert retention.prune_dead_letters(older_than) == self.model.prune_dead_letters(everything)

    # -- after every step ------------------------------------------------------------------------

    @invariant()
    def agrees_with_model(self) -> None:
        jobs = {r["id"]: r for r in Job.objects.values(*JOB_FIELDS)}
        dead = {r["id"]: r for r in DeadLetter.objects.values(*DEAD_FIELDS)}
        dead_job_ids = Counter(r["job_id"] for r in dead.values())
        # Nothing lost, nothing duplicated.
        assert max(dead_job_ids.values(), default=1) == 1, f"a job died twice: {dead_job_ids}"
        assert not jobs.keys() & dead_job_ids.keys(), "a job is both live and dead"
        present = jobs.keys() | dead_job_ids.keys()
        assert not present & self.model.gone.keys(), "a job came back"
        assert present | self.model.gone.keys() == self.model.created, (
            f"jobs lost: {self.model.created - present - self.model.gone.keys()}, "
            f"unknown: {present - self.model.created}"
        )
        assert {
            i: (
                r["task_name"],
                r["status"],
                r["attempts"],
                r["max_attempts"],
                r["priority"],
                r["unique_key"],
                history(r["errors"]),
                provenance(r["requeue_history"]),
            )
            for i, r in jobs.items()
        } == self.model.expected_jobs()
        assert {
            i: (
                r["job_id"],
                r["task_name"],
                r["queue_name"],
                r["reason"],
                r["attempts"],
                r["max_attempts"],
                r["unique_key"],
                history(r["errors"]),
                provenance(r["requeue_history"]),
            )
            for i, r in dead.items()
        } == self.model.expected_dead()

    @invariant()
    def holds_invariants(self) -> None:
        rows = list(Job.objects.values(*JOB_FIELDS))
        for r in rows:
            running = r["status"] == RUNNING
            assert r["attempts"] <= r["max_attempts"], r
            assert running == (r["lease_token"] is not None) == (r["lease_expires_at"] is not None), r
            # A finished job names the worker of its last attempt; a ready one names none.
            assert (r["lease_owner"] != "") == (r["status"] != READY), r
            assert (r["first_attempt_at"] is None) == (r["attempts"] == 0), r
            assert (r["finished_at"] is not None) == (r["status"] == SUCCEEDED), r
            assert r["requeue_count"] == len(r["requeue_history"]), r
            assert len(r["errors"]) <= HISTORY_LIMIT, r
        for d in DeadLetter.objects.values(*DEAD_FIELDS):
            assert d["attempts"] <= d["max_attempts"], d
            assert d["requeue_count"] == len(d["requeue_history"]), d
            assert 1 <= len(d["errors"]) <= HISTORY_LIMIT, d
            assert d["last_error"], d
        keys = Counter(r["unique_key"] for r in rows if r["status"] in LIVE and r["unique_key"])
        assert max(keys.values(), default=1) == 1, f"two live jobs share a unique_key: {keys}"
        leases = {r["id"]: (r["attempts"], r["lease_token"]) for r in rows if r["status"] == RUNNING}
        assert leases == {i: (a.attempt, a.token) for i, a in self.held.items()}, "held leases"


MACHINE_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=50,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture
def short_history(settings: Any) -> None:
    settings.JOBRETRY = {**settings.JOBRETRY, "ERROR_HISTORY_LIMIT": HISTORY_LIMIT}


# 40 examples of 50 steps, every step checked against the tables: 60 s on a 2-core machine at load
# 7, more under coverage or beside a CPU hog; the suite's 120 s would then fail a passing search.
@pytest.mark.timeout(600)
@pytest.mark.usefixtures("short_history")
def test_the_services_agree_with_the_model_after_every_step() -> None:
    run_state_machine_as_test(JobStoreMachine, settings=MACHINE_SETTINGS)
