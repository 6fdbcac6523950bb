"""Recording attempt outcomes: success, durable retry, or dead letter.

An attempt ends as a :class:`Succeeded`, :class:`Failed` or
:class:`Interrupted` (jobs/claimed.py). The recorder turns a failure
into one :class:`FailedAttempt`, classified and decided once
(:meth:`Recorder.failed`); jobs/failures.py writes it, fenced, and
this module announces what was written (jobs/events.py). A stale
outcome (the lease was lost and someone else owns the job now) changes
nothing and never enters the retry path (docs/design.md#rule-3).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, DataError, transaction

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.console import counters
from django_jobretry.deadletters.chunks import Requeued, announce_requeue
from django_jobretry.flows import events as flow_events
from django_jobretry.jobs import claim, decisions
from django_jobretry.jobs.claimed import (
    ClaimedJob,
    Failed,
    FailedAttempt,
    Interrupted,
    Succeeded,
    Written,
    succeed,
)
from django_jobretry.jobs.decisions import classify_failure, dead_reason
from django_jobretry.jobs.enqueue import notify
from django_jobretry.jobs.events import (
    JOB_LINE,
    announce_dead,
    announce_retry,
    failure_phrase,
    job_arguments,
    job_line_args,
    log_extra,
    send_job_signal,
)
from django_jobretry.jobs.failures import (
    decided,
    honour_cancels,
    retry_params,
    revive,
    write_failures,
    write_one,
    written,
)
from django_jobretry.jobs.history import (
    DEFERRALS,
    AttemptEnd,
    error_entry,
    event_entry,
    minimal_entry,
    render_error,
    what_ended,
)
from django_jobretry.jobs.recovery import announce_cancelled
from django_jobretry.jobs.sql import loggable, statement_guard
from django_jobretry.models import CounterEvent, DeadReason
from django_jobretry.policy import Classification, Defer, ErrorKind, GiveUp
from django_jobretry.registry import policy_for
from django_jobretry.schedules.rows import record_successes

logger = logging.getLogger("django_jobretry")

#: Retry times a Recorder keeps (Recorder.retries_due); a worker failing faster polls for the rest.
RETRIES_REMEMBERED = 1_000
#: The actor recorded in requeue history for requeues spent from a policy's budget.
AUTO_REQUEUE_ACTOR = "automatic (requeue_budget)"


class Recorder:
    """Writes outcomes for one worker; ``sender`` is what signals are sent with."""

    def __init__(self, worker_id: str, sender: type) -> None:
        self.worker_id, self.sender = worker_id, sender
        #: When the retries this recorder scheduled come due (time.monotonic(), a heap), so
        #: an idle worker claims a short retry then instead of at its next poll.
        self.retries_due: list[float] = []

    def failed(self, outcome: Failed | Interrupted) -> FailedAttempt:
        """The failed attempt of ``outcome``: classified, its entry built, decided unless by ``retry_for``."""
        job, rule = outcome.job, None
        policy = policy_for(job.task_name, job.policy_name)
        if isinstance(outcome, Failed) and outcome.ended in DEFERRALS:
            return decisions.deferred_attempt(outcome, policy, self.worker_id)
        if isinstance(outcome, Interrupted):  # no backoff: only the hold
            classification = Classification(ErrorKind.RETRYABLE, outcome.hold)
            entry = event_entry(
                job.attempt, outcome.ended, "worker shut down before the job finished", self.worker_id
            )
        else:
            classification = classify_failure(policy, outcome)
            rule = classification.rule
            ended = AttemptEnd.FATAL if classification.kind is ErrorKind.FATAL else outcome.ended
            rendered = outcome.rendered or render_error(outcome.error)
            entry = error_entry(job.attempt, rendered, classification.kind, ended, self.worker_id, rule=rule)
        fallback = minimal_entry(job.attempt, outcome.ended, classification.kind, self.worker_id, rule=rule)
        if isinstance(outcome, Failed) and outcome.trace_id:
            entry["trace_id"] = fallback["trace_id"] = outcome.trace_id
        attempt = FailedAttempt(job, policy, classification, entry, fallback)
        if isinstance(outcome, Failed):
            attempt = decisions.counted(attempt, outcome.error)
        return attempt if policy.retry_for is not None else decided(attempt, elapsed=None)

    def record_successes(self, outcomes: Sequence[Succeeded]) -> None:
        """Record finished attempts in one statement, with the values they keep."""
        self._announce_successes(outcomes, succeed(*_written(outcomes)))

    def record_successes_and_claim(
        self,
        outcomes: Sequence[Succeeded],
        *,
        retries: Sequence[FailedAttempt] = (),
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None,
        skip_lanes: bool = False,
    ) -> list[ClaimedJob]:
        """:meth:`record_successes` and ``retries`` (each decided a retry), and claim up to
        ``limit`` jobs, in the same statement (``skip_lanes``: not limited ones)."""
        history = jobretry_settings.error_history_limit

        def write_and_claim(with_retries: bool) -> tuple[Written, list[ClaimedJob]]:
            params = retry_params(retries, history, prefix="retry_") if with_retries and retries else None
            return claim.succeed_and_claim(
                *_written(outcomes),
                owner=self.worker_id,
                limit=limit,
                lease_seconds=lease_seconds,
                queues=queues,
                retries=params,
                skip_lanes=skip_lanes,
            )

        try:
            with statement_guard():
                recorded, claimed = write_and_claim(True)
        except DataError:  # only an error text can be refused: the rest again, then each retry alone
            recorded, claimed = write_and_claim(False)
            done = [write_one(attempt, history) for attempt in retries]
        else:
            with statement_guard():
                done = honour_cancels(written(retries, recorded), history)
        self._announce_successes(outcomes, recorded)
        for attempt in done:
            self._announce_failure(attempt)
        return claimed

    def _announce_successes(self, outcomes: Sequence[Succeeded], recorded: Written) -> None:
        for outcome in outcomes:
            job = outcome.job
            if job.id not in recorded:
                self._stale(job, "succeeded")
                continue
            logger.info(f"{JOB_LINE} succeeded", *job_line_args(job), extra=log_extra(job, "succeeded"))
            send_job_signal(self.sender, signals.job_succeeded, job)
            if outcome.finish is not None and recorded.finished_at is not None:  # it is: the id was written
                outcome.finish(outcome, recorded.finished_at)
        steps = [o.job.flow_step_id for o in outcomes if o.job.flow_step_id and o.job.id in recorded]
        if steps and recorded.finished_at is not None:
            flow_events.completed(steps, recorded.finished_at)
        runs = [o.job.schedule_name for o in outcomes if o.job.schedule_name and o.job.id in recorded]
        if runs:
            try:
                record_successes(runs)
            except DatabaseError as exc:  # only what an alert reads: the successes are recorded
                logger.warning("could not note the success of a schedule's run", extra=loggable(exc))

    def record_failure(self, outcome: Failed | Interrupted) -> None:
        self.record_failures([self.failed(outcome)])

    def record_failures(self, attempts: Sequence[FailedAttempt]) -> None:
        """Write and announce ``attempts`` (jobs/failures.py), the retries in one statement."""
        for attempt in write_failures(attempts, jobretry_settings.error_history_limit):
            self._announce_failure(attempt)

    def _announce_failure(self, attempt: FailedAttempt) -> None:
        job, entry, decision = attempt.job, attempt.entry, attempt.decision
        if attempt.cancelled_by and attempt.dead_letter_id is not None:
            how = f"after it {what_ended(entry)}, instead of a retry"
            announce_cancelled(self.sender, job, attempt.cancelled_by, attempt.dead_letter_id, how)
            return
        if attempt.stale or decision is None:
            self._stale(job, "failed")
            return
        phrase, message = failure_phrase(entry, job_arguments(job))
        details: dict[str, Any] = {"error_class": entry["error_class"], "error_message": message}
        if isinstance(decision, GiveUp) and attempt.dead_letter_id is not None:
            reason = dead_reason(decision.reason)
            dead_id = attempt.dead_letter_id
            # Fatal means retrying cannot help: the budget is for transient outages.
            requeued_as = None
            if attempt.policy.requeue_budget and reason is not DeadReason.FATAL:
                requeued_as = self._auto_requeue(attempt, dead_id)
            # After the requeue, so a receiver knows whether the job has really ended.
            announce_dead(
                self.sender,
                job,
                "%s; dead letter %s (%s)",
                (phrase, dead_id, reason),
                reason=reason.value,
                dead_letter_id=dead_id,
                requeued_as=requeued_as,
                **details,
            )
        elif isinstance(decision, Defer):
            decisions.announce(attempt, decision)
            heapq.heappush(self.retries_due, time.monotonic() + decision.delay.total_seconds())
        elif attempt.retry is not None:
            delay = attempt.retry.delay
            again = "ready again" if entry["ended"] == AttemptEnd.SHUTDOWN else "retry"
            announce_retry(
                self.sender,
                job,
                "%s; %s in %.3fs",
                (phrase, again, delay.total_seconds()),
                reason=entry["ended"],
                delay=delay,
                **details,
            )
            if len(self.retries_due) < RETRIES_REMEMBERED:  # past that, the poll finds them
                heapq.heappush(self.retries_due, time.monotonic() + delay.total_seconds())

    def _auto_requeue(self, attempt: FailedAttempt, dead_id: int) -> int | None:
        """Spend one unit of the policy's requeue budget, after max_delay; the new job's id, if any.

        Opt-in only (docs/design.md#dead-letters): nothing requeues itself
        otherwise. The dead letter was made by this recorder a moment ago, so
        its requeue count is the burial's; it is revived directly, as an
        operator's requeue would revive it, and announced the same way.
        """
        job, policy = attempt.job, attempt.policy
        if attempt.requeue_count >= policy.requeue_budget:
            return None
        with transaction.atomic():
            revived = revive(
                {dead_id: policy.max_attempts}, run_after=policy.max_delay, actor=AUTO_REQUEUE_ACTOR
            )
            new_id = revived[0].job_id if revived else None
            if new_id is not None:
                notify([job.queue_name])
                counters.count(CounterEvent.REQUEUED, [(job.task_name, job.queue_name)])
        why = "a live job holds its unique_key" if revived else "it is no longer a dead letter"
        if new_id is None:
            logger.info(
                "automatic requeue of dead letter %s skipped: %s",
                dead_id,
                why,
                extra=log_extra(job, "auto_requeue_skipped", dead_letter_id=dead_id),
            )
            return None
        count = attempt.requeue_count + 1
        announce_requeue(Requeued(dead_id, new_id, job.task_name, job.queue_name, count), AUTO_REQUEUE_ACTOR)
        logger.info(
            "dead letter %s requeued automatically as job %s (%d of %d)",
            dead_id,
            new_id,
            count,
            policy.requeue_budget,
            extra=log_extra(job, "auto_requeued", dead_letter_id=dead_id, new_job_id=new_id),
        )
        return new_id

    def _stale(self, job: ClaimedJob, what: str) -> None:
        logger.warning(
            f"{JOB_LINE} %s after losing its lease; outcome ignored (worker %s)",
            *job_line_args(job),
            what,
            self.worker_id,
            extra=log_extra(job, "stale_ignored", stale_outcome=what, worker=self.worker_id),
        )


def _written(outcomes: Sequence[Succeeded]) -> tuple[list[ClaimedJob], dict[int, str]]:
    """The jobs of ``outcomes`` and the values they keep (job id -> JSON text), as statements take them."""
    return [o.job for o in outcomes], {o.job.id: o.result for o in outcomes if o.result is not None}
