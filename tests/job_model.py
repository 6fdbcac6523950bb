"""A pure model of the jobs table and the dead letters, for tests/integration/jobs/test_state_machine.py.

No Django and no database: dictionaries saying what the services should have
left behind after each operation. The state machine runs every operation on
both and compares them after every step.

Time is logical. Every policy the machine uses backs off for an hour, so a
retry is never due by itself: it becomes due when the machine moves its
``run_at`` to now. ``due`` is the tick at which a ready job became due (None
while it waits for its backoff); claims take due jobs in
(priority desc, due, id) order, which is the claim's (priority desc, run_at,
id) order because ticks are taken in statement order, on one connection.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

READY, RUNNING, SUCCEEDED = "ready", "running", "succeeded"
LIVE = (READY, RUNNING)

#: How an attempt can fail, as the machine makes it fail.
RETRYABLE, RETRY_NOW, FATAL = "retryable", "retry_now", "fatal"

#: One ended attempt: (attempt, ended), like an ``errors`` entry.
type Ended = tuple[int, str]
#: One requeue: (dead_letter_id, job_id, reason), like a ``requeue_history`` entry.
type Requeue = tuple[int, int, str]


@dataclass(frozen=True)
class Kind:
    """A task as the model sees it: name, queue and the limits of its policy."""

    task: str
    queue: str
    max_attempts: int
    requeue_budget: int = 0


@dataclass
class ModelJob:
    id: int
    kind: Kind
    priority: int
    unique_key: str | None
    due: int | None
    status: str = READY
    attempts: int = 0
    lease_expired: bool = False
    #: An operator asked to cancel the running attempt: it ends as a "cancelled" dead letter
    #: unless it succeeds or dies for its own reason first.
    cancel_requested: bool = False
    ended: list[Ended] = field(default_factory=list)
    requeues: list[Requeue] = field(default_factory=list)

    @property
    def original_id(self) -> int:
        """The job id the requeue chain started from."""
        return self.requeues[0][1] if self.requeues else self.id


@dataclass
class ModelDead:
    id: int
    job: ModelJob
    reason: str


class Model:
    def __init__(self, history_limit: int) -> None:
        self.history_limit = history_limit
        self.jobs: dict[int, ModelJob] = {}
        self.dead: dict[int, ModelDead] = {}
        #: Dead letter ids requeued, discarded or pruned: acting on them again is NotDead.
        self.handled: set[int] = set()
        #: Every job id ever created (enqueue or requeue).
        self.created: set[int] = set()
        #: Job ids in neither table any more, and why: nothing else may be missing.
        self.gone: dict[int, str] = {}
        self._clock = 0

    def tick(self) -> int:
        self._clock += 1
        return self._clock

    # -- queries ---------------------------------------------------------------------------------

    def live_holder(self, key: str | None) -> int | None:
        if key is None:
            return None
        holders = [j.id for j in self.jobs.values() if j.status in LIVE and j.unique_key == key]
        return holders[0] if holders else None

    def claimable(self, limit: int) -> list[ModelJob]:
        due = [j for j in self.jobs.values() if j.status == READY and j.due is not None]
        return sorted(due, key=lambda j: (-j.priority, j.due, j.id))[:limit]

    def expired(self) -> list[ModelJob]:
        return [j for j in self.jobs.values() if j.status == RUNNING and j.lease_expired]

    def requeue_refusal(self, dead_id: int) -> str | None:
        """ "not_dead", "conflict" (a live job holds the key) or None: the requeue goes through."""
        if dead_id not in self.dead:
            return "not_dead"
        return "conflict" if self.live_holder(self.dead[dead_id].job.unique_key) is not None else None

    def auto_requeues(self, job_id: int, reason: str) -> bool:
        """Whether the Recorder spends the policy's requeue budget on this death."""
        job = self.jobs[job_id]
        spent = reason not in ("fatal", "cancelled")
        return spent and len(job.requeues) < job.kind.requeue_budget

    # -- transitions -----------------------------------------------------------------------------

    def enqueued(self, job_id: int, kind: Kind, priority: int, key: str | None) -> None:
        assert job_id not in self.created, f"job id {job_id} was handed out twice"
        self.created.add(job_id)
        self.jobs[job_id] = ModelJob(job_id, kind, priority, key, due=self.tick())

    def claim(self, limit: int) -> list[ModelJob]:
        picked = self.claimable(limit)
        for job in picked:
            job.status, job.attempts, job.due, job.lease_expired = RUNNING, job.attempts + 1, None, False
        return picked

    def succeed(self, job_id: int) -> None:
        job = self.jobs[job_id]
        assert job.status == RUNNING
        job.status, job.lease_expired, job.cancel_requested = SUCCEEDED, False, False

    def fail(self, job_id: int, how: str) -> str | None:
        """Record the failed attempt; the dead letter reason, or None when a retry is scheduled."""
        job = self.jobs[job_id]
        assert job.status == RUNNING
        job.ended.append((job.attempts, "fatal" if how == FATAL else "error"))
        if how == FATAL:
            return "fatal"
        if job.attempts >= job.kind.max_attempts:
            return "exhausted"
        if job.cancel_requested:
            return "cancelled"  # the retry honours the request
        job.status, job.lease_expired = READY, False
        job.due = self.tick() if how == RETRY_NOW else None
        return None

    def recovered(self, job_id: int) -> str | None:
        """Lease recovery of one expired job: the dead letter reason, or None for a retry."""
        job = self.jobs[job_id]
        assert job.status == RUNNING
        assert job.lease_expired
        job.ended.append((job.attempts, "lease_expired"))
        if job.cancel_requested:
            return "cancelled"
        if job.attempts >= job.kind.max_attempts:
            return "lease_expired"
        job.status, job.due, job.lease_expired = READY, None, False
        return None

    def cancel(self, job_id: int) -> str:
        """An operator's cancel: "buried" (a ready job), "stopping" (running) or "not_live"."""
        job = self.jobs.get(job_id)
        if job is None or job.status == SUCCEEDED:
            return "not_live"
        if job.status == RUNNING:
            job.cancel_requested = True
            return "stopping"  # its worker, a retry or lease recovery ends the run as cancelled
        job.ended.append((job.attempts, "cancelled"))
        return "buried"

    def bury(self, job_id: int, dead_id: int, reason: str) -> None:
        assert dead_id not in self.dead
        assert dead_id not in self.handled
        self.dead[dead_id] = ModelDead(dead_id, self.jobs.pop(job_id), reason)

    def make_due(self) -> int:
        now = self.tick()
        waiting = [j for j in self.jobs.values() if j.status == READY and j.due is None]
        for job in waiting:
            job.due = now
        return len(waiting)

    def requeued(self, dead_id: int, new_id: int, *, due_now: bool) -> None:
        dead = self.dead.pop(dead_id)
        self.handled.add(dead_id)
        old = dead.job
        self.gone[old.id] = f"requeued as job {new_id}"
        assert new_id not in self.created, f"job id {new_id} was handed out twice"
        self.created.add(new_id)
        self.jobs[new_id] = ModelJob(
            new_id,
            old.kind,
            old.priority,
            old.unique_key,
            due=self.tick() if due_now else None,
            ended=list(old.ended),  # a requeued job keeps its attempt history
            requeues=[*old.requeues, (dead_id, old.id, dead.reason)],
        )

    def discard(self, dead_id: int) -> None:
        dead = self.dead.pop(dead_id)
        self.handled.add(dead_id)
        self.gone[dead.job.id] = "discarded"

    def prune_succeeded(self, everything: bool) -> int:
        old = [j.id for j in self.jobs.values() if j.status == SUCCEEDED] if everything else []
        for job_id in old:
            del self.jobs[job_id]
            self.gone[job_id] = "pruned"
        return len(old)

    def prune_dead_letters(self, everything: bool) -> Counter[tuple[str, str]]:
        counts: Counter[tuple[str, str]] = Counter()
        for dead_id in list(self.dead) if everything else []:
            dead = self.dead.pop(dead_id)
            self.handled.add(dead_id)
            self.gone[dead.job.id] = "dead letter pruned"
            counts[(dead.job.kind.queue, dead.reason)] += 1
        return counts

    # -- what the tables should hold -------------------------------------------------------------

    def _history(self, job: ModelJob) -> list[Ended]:
        return job.ended[-self.history_limit :]

    def expected_jobs(self) -> dict[int, tuple[object, ...]]:
        """Job id -> (task, status, attempts, max_attempts, priority, unique_key, errors, requeues)."""
        return {
            j.id: (
                j.kind.task,
                j.status,
                j.attempts,
                j.kind.max_attempts,
                j.priority,
                j.unique_key,
                self._history(j),
                j.requeues,
            )
            for j in self.jobs.values()
        }

    def expected_dead(self) -> dict[int, tuple[object, ...]]:
        """Dead letter id -> (job_id, task, queue, reason, attempts, max_attempts, key, errors, requeues)."""
        return {
            d.id: (
                d.job.id,
                d.job.kind.task,
                d.job.kind.queue,
                d.reason,
                d.job.attempts,
                d.job.kind.max_attempts,
                d.job.unique_key,
                self._history(d.job),
                d.job.requeues,
            )
            for d in self.dead.values()
        }
