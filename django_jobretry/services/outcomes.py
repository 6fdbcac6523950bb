"""Recording attempt outcomes: success, durable retry, or dead letter.

An attempt ends as one of three values - :class:`Succeeded`, :class:`Failed`
(the handler raised) or :class:`Interrupted` (the worker shut down first).
The policy decides what a failure means; services/failure_writes.py writes
the decision, fenced, and this module announces it. A stale outcome (the lease was lost and someone else
owns the job now) changes nothing and never enters the retry path
(docs/design.md#rule-3).
"""

from __future__ import annotations

import functools
import heapq
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import DataError

from django_jobretry import signals
from django_jobretry.conf import jobretry_settings
from django_jobretry.exceptions import NotDead, RequeueConflict
from django_jobretry.models import DeadLetter, DeadReason
from django_jobretry.policy import Classification, ErrorKind, GiveUp, RetryPolicy
from django_jobretry.registry import policy_for
from django_jobretry.services import deadletters, transitions
from django_jobretry.services.cancel import announce_cancelled
from django_jobretry.services.claimed import ClaimedJob
from django_jobretry.services.decisions import classify_failure
from django_jobretry.services.error_lines import failure_phrase, job_arguments
from django_jobretry.services.failure_writes import (
    BatchedRetry,
    PendingFailure,
    WrittenFailure,
    honour_cancels,
    split,
    statement_guard,
    write_failures,
    write_refused,
)
from django_jobretry.services.history import (
    AttemptEnd,
    RenderedError,
    error_entry,
    event_entry,
    minimal_entry,
    render_error,
    what_ended,
)
from django_jobretry.services.job_lines import JOB_LINE, job_line_args, log_extra, send_job_signal

logger = logging.getLogger("django_jobretry")

#: Retry times a Recorder keeps (Recorder.retries_due); a worker failing faster polls for the rest.
RETRIES_REMEMBERED = 1_000
#: The actor recorded in requeue history for requeues spent from a policy's budget.
AUTO_REQUEUE_ACTOR = "automatic (requeue_budget)"


@dataclass(frozen=True)
class Succeeded:
    """The handler returned; ``result`` is the JSON text to keep, for tasks that keep one."""

    job: ClaimedJob
    result: str | None = None


@dataclass(frozen=True)
class Failed:
    """The handler raised ``error``; ``ended`` says how the attempt is recorded.

    ``rendered`` is the error's text, rendered by the runner thread so that a
    slow or broken ``__str__`` never runs on the worker's main loop.
    """

    job: ClaimedJob
    error: BaseException
    ended: AttemptEnd = AttemptEnd.ERROR
    rendered: RenderedError | None = None
    #: Set when the error was classified where it was raised (a child process).
    classification: Classification | None = None


@dataclass(frozen=True)
class Interrupted:
    """The worker shut down before the handler finished: not the job's fault.

    ``hold`` keeps the job from being claimed again while the abandoned
    handler may still run, i.e. until the shutting-down process has exited.
    """

    job: ClaimedJob
    hold: timedelta = timedelta(0)
    ended: AttemptEnd = AttemptEnd.SHUTDOWN


type Outcome = Succeeded | Failed | Interrupted


class Recorder:
    """Writes outcomes for one worker; ``sender`` is what signals are sent with."""

    def __init__(self, worker_id: str, sender: type) -> None:
        self.worker_id, self.sender = worker_id, sender
        #: When the retries this recorder scheduled come due (time.monotonic(), a heap), so
        #: an idle worker claims a short retry then instead of at its next poll.
        self.retries_due: list[float] = []

    def record_successes(self, jobs: Sequence[ClaimedJob], results: Mapping[int, str] | None = None) -> None:
        """Record finished attempts in one statement; ``results``: job id -> returned JSON text."""
        self._announce_successes(jobs, transitions.succeed(jobs, results))

    def record_successes_and_claim(
        self,
        jobs: Sequence[ClaimedJob],
        results: Mapping[int, str] | None,
        *,
        retries: Sequence[BatchedRetry] = (),
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None,
    ) -> list[ClaimedJob]:
        """:meth:`record_successes` and ``retries`` (:meth:`take_retries`), and claim up to
        ``limit`` jobs, in the same statement."""
        history = jobretry_settings.error_history_limit
        claim = functools.partial(
            transitions.succeed_and_claim,
            jobs,
            results,
            owner=self.worker_id,
            limit=limit,
            lease_seconds=lease_seconds,
            queues=queues,
            history_limit=history,
        )
        try:
            with statement_guard():
                recorded, claimed = claim(retries=[retry.retrying for retry in retries])
        except DataError:  # only an error text can be refused: the rest again, then each retry alone
            recorded, claimed = claim()
            written = list(write_refused(retries, history))
        else:
            with statement_guard():
                written = honour_cancels([retry.written(recorded) for retry in retries], history)
        self._announce_successes(jobs, recorded)
        for failure in written:
            self._announce_failure(failure)
        return claimed

    def take_retries(self, outcomes: list[Failed]) -> list[BatchedRetry]:
        """Take the retries out of ``outcomes`` that can be written with the next claim.

        Decided now, written nowhere yet; what is left in ``outcomes`` is for
        :meth:`record_failures` (a policy with ``retry_for``, a dead letter).
        """
        batch, _ = split([self._pending(outcome) for outcome in outcomes])
        taken = {retry.item.job.id for retry in batch}
        outcomes[:] = [outcome for outcome in outcomes if outcome.job.id not in taken]
        return batch

    def _announce_successes(self, jobs: Sequence[ClaimedJob], recorded: set[int]) -> None:
        for job in jobs:
            if job.id not in recorded:
                self._stale(job, "succeeded")
                continue
            logger.info(f"{JOB_LINE} succeeded", *job_line_args(job), extra=log_extra(job, "succeeded"))
            send_job_signal(self.sender, signals.job_succeeded, job)

    def record_failure(self, outcome: Failed | Interrupted) -> None:
        self.record_failures([outcome])

    def record_failures(self, outcomes: list[Failed] | list[Failed | Interrupted]) -> None:
        """Write and announce failed attempts (services/failure_writes.py), batched where they can be.

        Each outcome leaves ``outcomes`` once it is written, so after a
        database error the list holds only what is still to be written.
        """
        pending = {outcome.job.id: (outcome, self._pending(outcome)) for outcome in outcomes}
        history = jobretry_settings.error_history_limit
        for written in write_failures([item for _, item in pending.values()], history):
            outcomes.remove(pending[written.job.id][0])  # type: ignore[arg-type]
            self._announce_failure(written)

    def _pending(self, outcome: Failed | Interrupted) -> PendingFailure:
        job, rule = outcome.job, None
        policy = policy_for(job.task_name, job.policy_name)
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
        return PendingFailure(job, policy, classification, entry, fallback)

    def _announce_failure(self, written: WrittenFailure) -> None:
        job, entry, decision = written.job, written.entry, written.decision
        if written.cancelled_by and written.dead_letter_id is not None:
            how = f"after it {what_ended(entry)}, instead of a retry"
            announce_cancelled(job, written.cancelled_by, written.dead_letter_id, self.sender, how)
        elif decision is None:
            self._stale(job, "failed")
        elif isinstance(decision, GiveUp):
            reason = DeadReason(decision.reason.value)
            dead_id = written.dead_letter_id
            phrase, message = failure_phrase(entry, job_arguments(job))
            logger.warning(
                f"{JOB_LINE} %s; dead letter %s (%s)",
                *job_line_args(job),
                phrase,
                dead_id,
                reason,
                extra=log_extra(
                    job,
                    "dead_lettered",
                    reason=reason.value,
                    dead_letter_id=dead_id,
                    error_class=entry["error_class"],
                    error_message=message,
                ),
            )
            # Fatal means retrying cannot help: the budget is for transient outages.
            requeued_as = None
            if dead_id is not None and written.policy.requeue_budget and reason is not DeadReason.FATAL:
                requeued_as = self._auto_requeue(job, written.policy, dead_id)
            # After the requeue, so a receiver knows whether the job has really ended.
            send_job_signal(
                self.sender,
                signals.job_dead_lettered,
                job,
                reason=reason.value,
                dead_letter_id=dead_id,
                requeued_as=requeued_as,
            )
        else:
            delay = decision.delay.total_seconds()
            phrase, message = failure_phrase(entry, job_arguments(job))
            logger.info(
                f"{JOB_LINE} %s; %s in %.3fs",
                *job_line_args(job),
                phrase,
                "ready again" if entry["ended"] == AttemptEnd.SHUTDOWN else "retry",
                delay,
                extra=log_extra(
                    job,
                    "retry_scheduled",
                    delay=delay,
                    error_class=entry["error_class"],
                    error_message=message,
                ),
            )
            if len(self.retries_due) < RETRIES_REMEMBERED:  # past that, the poll finds them
                heapq.heappush(self.retries_due, time.monotonic() + delay)
            send_job_signal(self.sender, signals.job_retry_scheduled, job, delay=decision.delay)

    def _auto_requeue(self, job: ClaimedJob, policy: RetryPolicy, dead_id: int) -> int | None:
        """Spend one unit of the policy's requeue budget, after max_delay; the new job's id, if any.

        Opt-in only (docs/design.md#dead-letters): nothing requeues itself otherwise.
        """
        used = DeadLetter.objects.filter(pk=dead_id).values_list("requeue_count", flat=True).first()
        if used is None or used >= policy.requeue_budget:
            return None
        try:
            revived = deadletters.requeue(dead_id, run_after=policy.max_delay, actor=AUTO_REQUEUE_ACTOR)
        except (NotDead, RequeueConflict) as exc:
            logger.info(
                "automatic requeue of dead letter %s skipped: %s",
                dead_id,
                exc,
                extra=log_extra(job, "auto_requeue_skipped", dead_letter_id=dead_id),
            )
            return None
        logger.info(
            "dead letter %s requeued automatically as job %s (%d of %d)",
            dead_id,
            revived.pk,
            revived.requeue_count,
            policy.requeue_budget,
            extra=log_extra(job, "auto_requeued", dead_letter_id=dead_id, new_job_id=revived.pk),
        )
        # Our own dead letter always becomes a Job (an int id); never another system's task.
        return revived.pk if isinstance(revived.pk, int) else None

    def _stale(self, job: ClaimedJob, what: str) -> None:
        logger.warning(
            f"{JOB_LINE} %s after losing its lease; outcome ignored",
            *job_line_args(job),
            what,
            extra=log_extra(job, "stale_ignored", stale_outcome=what),
        )
